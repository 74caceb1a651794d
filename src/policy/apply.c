/* Model policy application (apply.h). Every knob the client sent, and every knob a policy fills
 * in, gets one decision: forwarded, filled, overridden or stripped, with the deciding class, the
 * policy and a reason. When several policies match, the most restrictive class wins (known-bad >
 * unverified > required > known-good > optional), ties going to the policy first in id order, so
 * the outcome is deterministic. The context size follows both its parameter class and the
 * policy's context block: it reaches the engine only where the override is verified (or
 * supported, under the experimental gate); otherwise it becomes an admission limit. */
#include "policy/apply.h"

#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    enum qr_knob_type type;
} knobs[QR_KNOB__COUNT] = {
    [QR_KNOB_TEMPERATURE] = {"temperature", QR_KNOB_TYPE_F64},
    [QR_KNOB_TOP_K] = {"top_k", QR_KNOB_TYPE_I64},
    [QR_KNOB_TOP_P] = {"top_p", QR_KNOB_TYPE_F64},
    [QR_KNOB_MIN_P] = {"min_p", QR_KNOB_TYPE_F64},
    [QR_KNOB_TYPICAL_P] = {"typical_p", QR_KNOB_TYPE_F64},
    [QR_KNOB_REPEAT_PENALTY] = {"repeat_penalty", QR_KNOB_TYPE_F64},
    [QR_KNOB_REPEAT_LAST_N] = {"repeat_last_n", QR_KNOB_TYPE_I64},
    [QR_KNOB_PRESENCE_PENALTY] = {"presence_penalty", QR_KNOB_TYPE_F64},
    [QR_KNOB_FREQUENCY_PENALTY] = {"frequency_penalty", QR_KNOB_TYPE_F64},
    [QR_KNOB_SEED] = {"seed", QR_KNOB_TYPE_I64},
    [QR_KNOB_NUM_KEEP] = {"num_keep", QR_KNOB_TYPE_I64},
    [QR_KNOB_STOP] = {"stop", QR_KNOB_TYPE_STRS},
    [QR_KNOB_NUM_PREDICT] = {"num_predict", QR_KNOB_TYPE_I64},
    [QR_KNOB_NUM_CTX] = {"num_ctx", QR_KNOB_TYPE_I64},
};

const char *qr_knob_name(enum qr_knob k)
{
    return (unsigned) k < QR_KNOB__COUNT ? knobs[k].name : "?";
}

enum qr_knob_type qr_knob_type(enum qr_knob k)
{
    return (unsigned) k < QR_KNOB__COUNT ? knobs[k].type : QR_KNOB_TYPE_F64;
}

int qr_knob_find(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < QR_KNOB__COUNT; i++)
        if (strcmp(knobs[i].name, name) == 0)
            return i;
    if (strcmp(name, "max_tokens") == 0)
        return QR_KNOB_NUM_PREDICT;
    return -1;
}

const char *qr_knob_action_str(enum qr_knob_action a)
{
    static const char *const s[] = {"forward", "fill", "override", "strip"};
    return (unsigned) a < QR_ARRAY_LEN(s) ? s[a] : "?";
}

const char *qr_honour_str(enum qr_honour h)
{
    static const char *const s[] = {"none", "count_tokens", "admission_limit", "stop_scan"};
    return (unsigned) h < QR_ARRAY_LEN(s) ? s[h] : "?";
}

/* --- reading the request -------------------------------------------------------------------- */

static struct qr_opt_f64 *f64_slot(struct qr_sampling *s, enum qr_knob k)
{
    switch (k) {
    case QR_KNOB_TEMPERATURE:
        return &s->temperature;
    case QR_KNOB_TOP_P:
        return &s->top_p;
    case QR_KNOB_MIN_P:
        return &s->min_p;
    case QR_KNOB_TYPICAL_P:
        return &s->typical_p;
    case QR_KNOB_REPEAT_PENALTY:
        return &s->repeat_penalty;
    case QR_KNOB_PRESENCE_PENALTY:
        return &s->presence_penalty;
    case QR_KNOB_FREQUENCY_PENALTY:
        return &s->frequency_penalty;
    default:
        return NULL;
    }
}

static struct qr_opt_i64 *i64_slot(struct qr_sampling *s, struct qr_opt_i64 *max_tokens,
                                   struct qr_opt_i64 *ctx, enum qr_knob k)
{
    switch (k) {
    case QR_KNOB_TOP_K:
        return &s->top_k;
    case QR_KNOB_SEED:
        return &s->seed;
    case QR_KNOB_REPEAT_LAST_N:
        return &s->repeat_last_n;
    case QR_KNOB_NUM_KEEP:
        return &s->num_keep;
    case QR_KNOB_NUM_PREDICT:
        return max_tokens;
    case QR_KNOB_NUM_CTX:
        return ctx;
    default:
        return NULL;
    }
}

static bool client_sent(const struct qr_request *r, enum qr_knob k)
{
    struct qr_request *m = (struct qr_request *) r; /* only read through the slot helpers */
    if (k == QR_KNOB_STOP)
        return r->n_stop > 0;
    struct qr_opt_f64 *f = f64_slot(&m->sampling, k);
    if (f)
        return f->set;
    struct qr_opt_i64 *i = i64_slot(&m->sampling, &m->max_tokens, &m->context_len, k);
    return i && i->set;
}

/* Whether the client's value equals the policy's value (for a required knob). */
static bool same_value(const struct qr_request *r, enum qr_knob k, yyjson_val *v)
{
    struct qr_request *m = (struct qr_request *) r;
    if (k == QR_KNOB_STOP) {
        size_t n = yyjson_is_str(v) ? 1 : yyjson_arr_size(v);
        if (n != r->n_stop)
            return false;
        for (size_t i = 0; i < n; i++) {
            yyjson_val *s = yyjson_is_str(v) ? v : yyjson_arr_get(v, i);
            if (yyjson_get_len(s) != r->stop[i].len ||
                memcmp(yyjson_get_str(s), r->stop[i].ptr, r->stop[i].len) != 0)
                return false;
        }
        return true;
    }
    struct qr_opt_f64 *f = f64_slot(&m->sampling, k);
    if (f)
        return yyjson_is_num(v) && yyjson_get_num(v) == f->v;
    struct qr_opt_i64 *i = i64_slot(&m->sampling, &m->max_tokens, &m->context_len, k);
    return i && yyjson_is_int(v) && yyjson_get_sint(v) == i->v;
}

/* --- classification ------------------------------------------------------------------------- */

struct verdict {
    enum qr_param_class cls;
    const struct qr_policy *policy;
    const struct qr_policy_param *param; /* NULL when the policy does not name the knob */
};

static const struct qr_policy_param *find_param(const struct qr_policy *p, const char *name, int k)
{
    for (size_t i = 0; i < p->n_params; i++) {
        const struct qr_policy_param *q = &p->params[i];
        if (strcmp(q->name, name) == 0 || (k >= 0 && qr_knob_find(q->name) == k))
            return q;
    }
    return NULL;
}

static struct verdict classify(const struct qr_policy *const *pols, size_t n, const char *name,
                               int k)
{
    struct verdict v = {QR_PARAM_NONE, NULL, NULL};
    for (size_t i = 0; i < n; i++) {
        const struct qr_policy_param *q = find_param(pols[i], name, k);
        enum qr_param_class c = q ? q->cls : pols[i]->unlisted;
        if (c > v.cls) {
            v.cls = c;
            v.policy = pols[i];
            v.param = q;
        }
    }
    return v;
}

/* --- decisions ------------------------------------------------------------------------------ */

#define NO_DECISION ((enum qr_knob_action) - 1)

static enum qr_honour honour_of(int k)
{
    switch (k) {
    case QR_KNOB_NUM_PREDICT:
        return QR_HONOUR_COUNT_TOKENS;
    case QR_KNOB_NUM_CTX:
        return QR_HONOUR_ADMISSION_LIMIT;
    case QR_KNOB_STOP:
        return QR_HONOUR_STOP_SCAN;
    default:
        return QR_HONOUR_NONE;
    }
}

static const char *strip_reason(int k, enum qr_param_class cls, bool named)
{
    if (cls == QR_PARAM_KNOWN_BAD)
        return "known-bad for this model/backend/version/hardware: never forwarded, not even "
               "with the experimental gate";
    if (!named)
        return "not named by the policy, so unverified: kept off the fast path (set the "
               "experimental gate to forward it)";
    switch (k) {
    case QR_KNOB_NUM_PREDICT:
        return "unverified on this model/backend/version/hardware: kept off the fast path; the "
               "Runtime counts completion tokens and stops at the limit itself";
    case QR_KNOB_STOP:
        return "unverified on this model/backend/version/hardware: kept off the fast path; the "
               "Runtime scans the output for the stop sequences itself";
    case QR_KNOB_NUM_CTX:
        return "unverified on this model/backend/version/hardware: kept off the fast path; the "
               "requested context becomes an admission limit";
    default:
        return "unverified on this model/backend/version/hardware: kept off the fast path (set "
               "the experimental gate to forward it)";
    }
}

/* Decide one knob from its class (same: the client sent exactly a required value); the context
 * rules are layered on by decide_ctx. d->action stays NO_DECISION when the client did not send
 * the knob and no policy fills it in. */
static void decide(struct qr_knob_decision *d, struct verdict v, bool gate, bool same)
{
    d->action = NO_DECISION;
    if (!d->client_set && v.cls != QR_PARAM_REQUIRED && v.cls != QR_PARAM_KNOWN_GOOD)
        return;
    d->cls = v.cls;
    d->policy_id = v.policy ? v.policy->id : NULL;
    switch (v.cls) {
    case QR_PARAM_NONE:
        d->action = QR_KNOB_FORWARD;
        d->reason = "no model policy governs this request: forwarded as sent";
        break;
    case QR_PARAM_OPTIONAL:
        d->action = QR_KNOB_FORWARD;
        d->reason = "optional in the policy: forwarded as sent";
        break;
    case QR_PARAM_KNOWN_GOOD:
        if (d->client_set) {
            d->action = QR_KNOB_FORWARD;
            d->reason = "known-good in the policy: forwarded";
        } else if (v.param && v.param->value && v.policy->fill_known_good) {
            d->action = QR_KNOB_FILL;
            d->policy_value = v.param->value;
            d->reason = "known-good value filled in: the client sent none and the policy fills "
                        "known-good values";
        }
        break;
    case QR_PARAM_REQUIRED:
        d->policy_value = v.param ? v.param->value : NULL;
        if (!d->client_set) {
            d->action = QR_KNOB_FILL;
            d->reason = "required by the policy: its value is filled in";
        } else if (same) {
            d->action = QR_KNOB_FORWARD;
            d->reason = "required by the policy: the client sent the required value";
        } else {
            d->action = QR_KNOB_OVERRIDE;
            d->reason = "required by the policy: the client's value is replaced";
        }
        break;
    case QR_PARAM_UNVERIFIED:
        if (gate) {
            d->action = QR_KNOB_FORWARD;
            d->experimental = true;
            d->reason = "unverified: forwarded only because the experimental gate is set";
        } else {
            d->action = QR_KNOB_STRIP;
            d->honour = honour_of(d->knob);
            d->reason = strip_reason(d->knob, v.cls, v.param != NULL);
        }
        break;
    case QR_PARAM_KNOWN_BAD:
        d->action = QR_KNOB_STRIP;
        d->honour = honour_of(d->knob);
        d->reason = strip_reason(d->knob, v.cls, true);
        break;
    }
}

/* num_ctx reaches the engine only where the context override is verified for this exact match,
 * or supported and the experimental gate is set. */
static void decide_ctx(struct qr_knob_decision *d, const struct qr_policy_context *c, bool gate)
{
    if (d->action == NO_DECISION || d->cls == QR_PARAM_NONE || d->action == QR_KNOB_STRIP)
        return;
    if (c->override_verified)
        return;
    if (!c->override_supported) {
        d->action = QR_KNOB_STRIP;
        d->experimental = false;
        d->policy_value = NULL;
        d->reason = "the backend does not support a per-request context override: the requested "
                    "context becomes an admission limit";
    } else if (gate) {
        d->experimental = true;
        d->reason = "context override supported but not verified for this "
                    "backend/model/version/hardware: forwarded only because the experimental "
                    "gate is set";
        return;
    } else {
        d->action = QR_KNOB_STRIP;
        d->policy_value = NULL;
        d->reason = "context override not verified for this backend/model/version/hardware: the "
                    "requested context becomes an admission limit; the backend keeps its native "
                    "context";
    }
    d->honour = QR_HONOUR_ADMISSION_LIMIT;
    if (!d->client_set) /* a filled value that may not be forwarded is simply not filled */
        d->action = NO_DECISION;
}

static void merge_context(const struct qr_policy *const *pols, size_t n,
                          struct qr_policy_effective *out)
{
    struct qr_policy_context *c = &out->context;
    if (n == 0)
        return;
    c->override_supported = c->override_verified = true;
    for (size_t i = 0; i < n; i++) {
        const struct qr_policy_context *p = &pols[i]->context;
        c->backend_managed |= p->backend_managed;
        c->override_supported &= p->override_supported;
        c->override_verified &= p->override_verified;
        if (p->has_native_max && p->native_max &&
            (!c->has_native_max || p->native_max < c->native_max)) {
            c->has_native_max = true;
            c->native_max = p->native_max;
        }
        if (p->has_requested_limit &&
            (!c->has_requested_limit || p->requested_limit < c->requested_limit)) {
            c->has_requested_limit = true;
            c->requested_limit = p->requested_limit;
        }
        if (!out->renderer)
            out->renderer = pols[i]->renderer;
        if (!out->parser)
            out->parser = pols[i]->parser;
    }
    out->context_limit = c->has_requested_limit ? c->requested_limit
                         : c->has_native_max    ? c->native_max
                                                : 0;
}

/* Put a decided canonical knob's value into the effective request. */
static void effect(const struct qr_request *req, const struct qr_knob_decision *d,
                   struct qr_policy_effective *out)
{
    enum qr_knob k = (enum qr_knob) d->knob;
    struct qr_request *m = (struct qr_request *) req;
    if (d->action == QR_KNOB_STRIP) {
        if (k == QR_KNOB_NUM_PREDICT)
            out->runtime_max_tokens = req->max_tokens;
        else if (k == QR_KNOB_NUM_CTX)
            out->admission_context = req->context_len;
        else if (k == QR_KNOB_STOP)
            out->runtime_stop = true;
        return;
    }
    if (k == QR_KNOB_STOP) {
        if (d->action == QR_KNOB_FORWARD)
            out->forward_stop = true;
        else
            out->stop_value = d->policy_value;
        return;
    }
    struct qr_opt_f64 *fo = f64_slot(&out->sampling, k), *fi = f64_slot(&m->sampling, k);
    struct qr_opt_i64 *io = i64_slot(&out->sampling, &out->max_tokens, &out->context_len, k);
    struct qr_opt_i64 *ii = i64_slot(&m->sampling, &m->max_tokens, &m->context_len, k);
    if (d->action == QR_KNOB_FORWARD) {
        if (fo)
            *fo = *fi;
        else if (io)
            *io = *ii;
    } else if (d->policy_value) {
        if (fo)
            *fo = (struct qr_opt_f64){true, yyjson_get_num(d->policy_value)};
        else if (io)
            *io = (struct qr_opt_i64){true, yyjson_get_sint(d->policy_value)};
    }
}

static void decide_knob(const struct qr_request *req, const struct qr_policy *const *pols, size_t n,
                        bool gate, enum qr_knob k, struct qr_policy_effective *out)
{
    struct qr_knob_decision d = {0};
    d.name = knobs[k].name;
    d.knob = (int) k;
    d.client_set = client_sent(req, k);
    struct verdict v = classify(pols, n, d.name, d.knob);
    bool same =
        v.cls == QR_PARAM_REQUIRED && d.client_set && v.param && same_value(req, k, v.param->value);
    decide(&d, v, gate, same);
    if (k == QR_KNOB_NUM_CTX)
        decide_ctx(&d, &out->context, gate);
    if (d.action == NO_DECISION)
        return; /* nothing sent, nothing filled */
    if (k == QR_KNOB_NUM_CTX && d.client_set && out->context_limit && req->context_len.v > 0 &&
        (uint64_t) req->context_len.v > out->context_limit)
        out->context_over_limit = true;
    effect(req, &d, out);
    out->decisions[out->n_decisions++] = d;
}

static void decide_extra(const struct qr_policy *const *pols, size_t n, bool gate, const char *name,
                         bool sent, struct qr_policy_effective *out, bool *forward)
{
    struct qr_knob_decision d = {0};
    d.name = name;
    d.knob = -1;
    d.client_set = sent;
    decide(&d, classify(pols, n, name, -1), gate, false);
    if (d.action == NO_DECISION)
        return;
    if (forward)
        *forward = d.action == QR_KNOB_FORWARD;
    out->decisions[out->n_decisions++] = d;
}

static bool extra_sent(const struct qr_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_extra_options; i++)
        if (qr_slice_eq(req->extra_options[i].key, name))
            return true;
    return false;
}

static bool decided(const struct qr_policy_effective *out, const char *name)
{
    return qr_policy_effective_find(out, name) != NULL;
}

enum qr_err qr_policy_apply(const struct qr_request *req, const struct qr_policy *const *pols,
                            size_t n, bool gate, struct qr_policy_effective *out,
                            struct qr_diag *diag)
{
    memset(out, 0, sizeof(*out));
    if (n > QR_POLICY_MAX_MATCH)
        return qr_diag_set(diag, QR_ERR_INVALID, "%zu matched policies, more than %u", n,
                           QR_POLICY_MAX_MATCH);
    if (req->n_extra_options > QR_POLICY_MAX_EXTRAS)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "%zu extra options, more than %u",
                           req->n_extra_options, QR_POLICY_MAX_EXTRAS);
    out->experimental_gate = gate;
    for (size_t i = 0; i < n; i++)
        out->policy_ids[i] = pols[i]->id;
    out->n_policies = n;
    merge_context(pols, n, out);
    for (int k = 0; k < QR_KNOB__COUNT; k++)
        decide_knob(req, pols, n, gate, (enum qr_knob) k, out);
    /* extra options the client sent (names are NUL-terminated arena copies) */
    for (size_t i = 0; i < req->n_extra_options; i++) {
        const char *name = req->extra_options[i].key.ptr;
        if (!name || decided(out, name))
            continue; /* a repeated key is decided once */
        decide_extra(pols, n, gate, name, true, out, &out->extra_forward[i]);
    }
    for (size_t i = 0; i < req->n_extra_options; i++) /* repeated keys follow the first */
        if (req->extra_options[i].key.ptr && !out->extra_forward[i]) {
            const struct qr_knob_decision *d =
                qr_policy_effective_find(out, req->extra_options[i].key.ptr);
            out->extra_forward[i] = d && d->action == QR_KNOB_FORWARD;
        }
    /* extra options a policy requires (or fills) that the client did not send */
    for (size_t p = 0; p < n; p++) {
        for (size_t i = 0; i < pols[p]->n_params; i++) {
            const struct qr_policy_param *q = &pols[p]->params[i];
            if (qr_knob_find(q->name) >= 0 || extra_sent(req, q->name) || decided(out, q->name) ||
                out->n_decisions >= QR_POLICY_MAX_DECISIONS)
                continue;
            decide_extra(pols, n, gate, q->name, false, out, NULL);
        }
    }
    return QR_OK;
}

const struct qr_knob_decision *qr_policy_effective_find(const struct qr_policy_effective *e,
                                                        const char *name)
{
    int k = qr_knob_find(name);
    for (size_t i = 0; i < e->n_decisions; i++) {
        const struct qr_knob_decision *d = &e->decisions[i];
        if (strcmp(d->name, name) == 0 || (k >= 0 && d->knob == k))
            return d;
    }
    return NULL;
}

yyjson_mut_val *qr_policy_effective_render(yyjson_mut_doc *doc, const struct qr_policy_effective *e)
{
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    yyjson_mut_val *ids = yyjson_mut_obj_add_arr(doc, o, "policies");
    for (size_t i = 0; i < e->n_policies; i++)
        yyjson_mut_arr_add_str(doc, ids, e->policy_ids[i]);
    yyjson_mut_obj_add_bool(doc, o, "experimental_gate", e->experimental_gate);
    if (e->renderer)
        yyjson_mut_obj_add_str(doc, o, "renderer", e->renderer);
    if (e->parser)
        yyjson_mut_obj_add_str(doc, o, "parser", e->parser);
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, o, "knobs");
    for (size_t i = 0; i < e->n_decisions; i++) {
        const struct qr_knob_decision *d = &e->decisions[i];
        yyjson_mut_val *k = yyjson_mut_arr_add_obj(doc, arr);
        yyjson_mut_obj_add_str(doc, k, "name", d->name);
        yyjson_mut_obj_add_str(doc, k, "class", qr_param_class_str(d->cls));
        yyjson_mut_obj_add_str(doc, k, "action", qr_knob_action_str(d->action));
        yyjson_mut_obj_add_bool(doc, k, "client_set", d->client_set);
        if (d->experimental)
            yyjson_mut_obj_add_bool(doc, k, "experimental", true);
        if (d->policy_id)
            yyjson_mut_obj_add_str(doc, k, "policy", d->policy_id);
        if (d->policy_value)
            yyjson_mut_obj_add_val(doc, k, "value", yyjson_val_mut_copy(doc, d->policy_value));
        if (d->action == QR_KNOB_STRIP)
            yyjson_mut_obj_add_str(doc, k, "honoured_by_runtime", qr_honour_str(d->honour));
        yyjson_mut_obj_add_str(doc, k, "reason", d->reason);
    }
    yyjson_mut_val *rt = yyjson_mut_obj_add_obj(doc, o, "runtime");
    if (e->runtime_max_tokens.set)
        yyjson_mut_obj_add_sint(doc, rt, "max_tokens", e->runtime_max_tokens.v);
    if (e->admission_context.set)
        yyjson_mut_obj_add_sint(doc, rt, "admission_context", e->admission_context.v);
    yyjson_mut_obj_add_bool(doc, rt, "stop_scan", e->runtime_stop);
    if (e->context_limit)
        yyjson_mut_obj_add_uint(doc, rt, "context_limit", e->context_limit);
    yyjson_mut_obj_add_bool(doc, rt, "context_over_limit", e->context_over_limit);
    yyjson_mut_val *c = yyjson_mut_obj_add_obj(doc, o, "context");
    yyjson_mut_obj_add_bool(doc, c, "backend_managed", e->context.backend_managed);
    yyjson_mut_obj_add_bool(doc, c, "override_supported", e->context.override_supported);
    yyjson_mut_obj_add_bool(doc, c, "override_verified", e->context.override_verified);
    return o;
}
