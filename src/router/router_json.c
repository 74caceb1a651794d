/* The route plan as JSON: the predecessor's plan fields (upstream fact sheet §3.4) kept by name,
 * plus the explanation the predecessor lacked - per-key evaluation, effective parameters, the
 * context decision, the fallback disclosure and every rejected candidate with its reason. Member
 * order is fixed, so equal plans render equal bytes. Field meanings: docs/ROUTER.md. */
#include <stdlib.h>
#include <string.h>

#include "router/router.h"

#define ADD_STR(doc, o, k, s)                                                                      \
    ((s) ? yyjson_mut_obj_add_strcpy((doc), (o), (k), (s))                                         \
         : yyjson_mut_obj_add_null((doc), (o), (k)))

/* The predecessor's "context": the chosen backend's capabilities.context object. */
static yyjson_mut_val *backend_context(yyjson_mut_doc *doc, const struct qr_cap_descriptor *d)
{
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    if (!o)
        return NULL;
    yyjson_mut_obj_add_bool(doc, o, "backend_managed", d->backend_managed);
    yyjson_mut_obj_add_str(doc, o, "override_supported",
                           qr_cap_state_str(d->caps[QR_CAP_CONTEXT_OVERRIDE]));
    yyjson_mut_obj_add_bool(doc, o, "override_verified", d->override_verified);
    if (d->native_max > 0)
        yyjson_mut_obj_add_int(doc, o, "native_max", d->native_max);
    return o;
}

static yyjson_mut_val *context_decision(yyjson_mut_doc *doc, const struct qr_route_context *c)
{
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    if (!o)
        return NULL;
    yyjson_mut_obj_add_str(doc, o, "action", qr_route_ctx_action_str(c->action));
    yyjson_mut_obj_add_uint(doc, o, "requested", c->requested);
    yyjson_mut_obj_add_uint(doc, o, "limit", c->limit);
    yyjson_mut_obj_add_uint(doc, o, "native_max", c->native_max);
    ADD_STR(doc, o, "native_max_source", c->native_max_source);
    yyjson_mut_obj_add_uint(doc, o, "backend_max", c->backend_max);
    yyjson_mut_obj_add_bool(doc, o, "backend_managed", c->backend_managed);
    yyjson_mut_obj_add_bool(doc, o, "override_supported", c->override_supported);
    yyjson_mut_obj_add_bool(doc, o, "override_verified", c->override_verified);
    ADD_STR(doc, o, "reason", c->reason);
    return o;
}

static yyjson_mut_val *failure(yyjson_mut_doc *doc, const struct qr_route_key_failure *f)
{
    yyjson_mut_val *o = qr_cap_eval_to_json(&f->eval, doc);
    if (!o || (!f->block && !f->entry))
        return o;
    yyjson_mut_val *l = yyjson_mut_obj_add_obj(doc, o, "ledger");
    if (!l)
        return NULL;
    if (f->block) {
        yyjson_mut_obj_add_strcpy(doc, l, "block", f->block->id);
        yyjson_mut_obj_add_strcpy(doc, l, "reason", f->block->reason);
    } else {
        yyjson_mut_obj_add_strcpy(doc, l, "entry", f->entry->id);
        yyjson_mut_obj_add_str(doc, l, "reason", "the ledger marks this engine build blocked");
    }
    yyjson_mut_obj_add_bool(doc, l, "certain", f->certain);
    if (f->alternative) {
        yyjson_mut_val *a = yyjson_mut_obj_add_obj(doc, l, "alternative");
        if (!a)
            return NULL;
        yyjson_mut_obj_add_strcpy(doc, a, "entry", f->alternative->id);
        yyjson_mut_obj_add_strcpy(doc, a, "backend_kind", f->alternative->backend_kind);
    } else if (f->block && f->block->alt_backend_kind) {
        yyjson_mut_val *a = yyjson_mut_obj_add_obj(doc, l, "alternative");
        if (!a)
            return NULL;
        yyjson_mut_obj_add_strcpy(doc, a, "backend_kind", f->block->alt_backend_kind);
        yyjson_mut_obj_add_bool(doc, a, "tested", false);
    }
    return o;
}

static yyjson_mut_val *candidate(yyjson_mut_doc *doc, const struct qr_route_candidate *c)
{
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    if (!o)
        return NULL;
    const struct qr_route_backend *b = c->backend;
    yyjson_mut_obj_add_strcpy(doc, o, "backend_id", b->desc->id);
    yyjson_mut_obj_add_str(doc, o, "backend_kind", qr_cap_backend_kind_str(b->desc->kind));
    yyjson_mut_obj_add_str(doc, o, "backend_state", qr_cap_backend_state_str(b->desc->state));
    ADD_STR(doc, o, "engine_version", b->n_engine_versions ? b->engine_versions[0] : NULL);
    yyjson_mut_obj_add_strcpy(doc, o, "artifact_uri", c->artifact_uri);
    yyjson_mut_obj_add_strcpy(doc, o, "served_name", c->served_name);
    yyjson_mut_obj_add_str(doc, o, "artifact_kind", qr_route_art_class_str(c->art_class));
    yyjson_mut_obj_add_str(doc, o, "reason", qr_route_reject_str(c->reason));
    ADD_STR(doc, o, "detail", c->detail);
    yyjson_mut_obj_add_bool(doc, o, "verified", c->verified);
    if (!qr_cap_set_empty(c->missing)) {
        yyjson_mut_val *m = qr_cap_set_to_json(c->missing, doc);
        if (!m || !yyjson_mut_obj_add_val(doc, o, "missing_capabilities", m))
            return NULL;
    }
    if (c->n_failures > 0) {
        yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, o, "failures");
        for (size_t i = 0; arr && i < c->n_failures; i++) {
            yyjson_mut_val *f = failure(doc, &c->failures[i]);
            if (!f || !yyjson_mut_arr_append(arr, f))
                return NULL;
        }
        if (!arr)
            return NULL;
    }
    if (c->reason == QR_ROUTE_REJ_CONTEXT) {
        yyjson_mut_val *cd = context_decision(doc, &c->context);
        if (!cd || !yyjson_mut_obj_add_val(doc, o, "context_decision", cd))
            return NULL;
    }
    return o;
}

static bool add_fallback(yyjson_mut_doc *doc, yyjson_mut_val *o, const struct qr_route_plan *p)
{
    const struct qr_route_fallback *f = &p->fallback;
    yyjson_mut_val *fb = yyjson_mut_obj_add_obj(doc, o, "fallback");
    if (!fb)
        return false;
    yyjson_mut_obj_add_bool(doc, fb, "used", f->used);
    yyjson_mut_obj_add_bool(doc, fb, "allowed", f->allowed);
    if (f->preferred != SIZE_MAX && (f->used || p->status == QR_ROUTE_FALLBACK_REFUSED)) {
        const struct qr_route_candidate *c = &p->candidates[f->preferred];
        yyjson_mut_val *pr = yyjson_mut_obj_add_obj(doc, fb, "preferred");
        if (!pr)
            return false;
        yyjson_mut_obj_add_strcpy(doc, pr, "backend_id", c->backend->desc->id);
        yyjson_mut_obj_add_strcpy(doc, pr, "artifact_uri", c->artifact_uri);
        yyjson_mut_obj_add_str(doc, pr, "reason", qr_route_reject_str(f->preferred_reason));
        ADD_STR(doc, pr, "detail", c->detail);
    }
    if (f->ledger_alternative_kind)
        yyjson_mut_obj_add_strcpy(doc, fb, "ledger_alternative_kind", f->ledger_alternative_kind);
    return true;
}

/* The winner's members (status ok). */
static bool add_winner(yyjson_mut_doc *doc, yyjson_mut_val *o, const struct qr_route_plan *p)
{
    const struct qr_route_candidate *w = &p->candidates[p->chosen];
    yyjson_mut_obj_add_strcpy(doc, o, "backend_id", p->backend_id);
    yyjson_mut_obj_add_str(doc, o, "backend_kind", qr_cap_backend_kind_str(p->backend_kind));
    yyjson_mut_obj_add_strcpy(doc, o, "artifact_uri", p->artifact_uri);
    yyjson_mut_obj_add_strcpy(doc, o, "served_name", p->served_name);
    ADD_STR(doc, o, "engine_version", p->engine_version);
    yyjson_mut_val *ctx = backend_context(doc, w->backend->desc);
    if (!ctx || !yyjson_mut_obj_add_val(doc, o, "context", ctx))
        return false;
    if (p->n_policies > 0) {
        yyjson_mut_val *ids = yyjson_mut_obj_add_arr(doc, o, "model_policy_ids");
        for (size_t i = 0; ids && i < p->n_policies; i++)
            yyjson_mut_arr_add_strcpy(doc, ids, p->policies[i]->id);
        if (!ids)
            return false;
    }
    yyjson_mut_val *caps = yyjson_mut_obj_add_arr(doc, o, "capabilities");
    for (size_t i = 0; caps && i < p->n_evals; i++) {
        yyjson_mut_val *e = qr_cap_eval_to_json(&p->evals[i], doc);
        if (!e || !yyjson_mut_arr_append(caps, e))
            return false;
    }
    if (!caps)
        return false;
    if (p->effective) {
        yyjson_mut_val *e = qr_policy_effective_render(doc, p->effective);
        if (!e || !yyjson_mut_obj_add_val(doc, o, "effective_parameters", e))
            return false;
    }
    yyjson_mut_val *cd = context_decision(doc, &p->context);
    return cd && yyjson_mut_obj_add_val(doc, o, "context_decision", cd);
}

yyjson_mut_val *qr_route_plan_render(yyjson_mut_doc *doc, const struct qr_route_plan *p)
{
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    if (!o)
        return NULL;
    yyjson_mut_obj_add_str(doc, o, "status", qr_route_status_code(p->status));
    ADD_STR(doc, o, "requested_identifier", p->requested_identifier);
    ADD_STR(doc, o, "canonical_model_id", p->canonical_model_id);
    if (p->status == QR_ROUTE_OK && !add_winner(doc, o, p))
        return NULL;
    if (!qr_cap_set_empty(p->required)) {
        yyjson_mut_val *r = qr_cap_set_to_json(p->required, doc);
        if (!r || !yyjson_mut_obj_add_val(doc, o, "required_capabilities", r))
            return NULL;
    }
    if (p->status != QR_ROUTE_OK && !qr_cap_set_empty(p->missing)) {
        yyjson_mut_val *m = qr_cap_set_to_json(p->missing, doc);
        if (!m || !yyjson_mut_obj_add_val(doc, o, "missing_capabilities", m))
            return NULL;
    }
    if (p->model) {
        ADD_STR(doc, o, "model_family", p->model_family);
        ADD_STR(doc, o, "model_variant", p->model_variant);
    }
    ADD_STR(doc, o, "hardware_class", p->hardware_class);
    yyjson_mut_obj_add_bool(doc, o, "strict", p->strict);
    if (p->model && !add_fallback(doc, o, p))
        return NULL;
    yyjson_mut_val *rej = yyjson_mut_obj_add_arr(doc, o, "rejected");
    for (size_t i = 0; rej && i < p->n_candidates; i++) {
        if (i == p->chosen)
            continue;
        yyjson_mut_val *c = candidate(doc, &p->candidates[i]);
        if (!c || !yyjson_mut_arr_append(rej, c))
            return NULL;
    }
    return rej ? o : NULL;
}

yyjson_mut_doc *qr_route_render(const struct qr_route_plan *p)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    if (!doc)
        return NULL;
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    if (!root)
        goto fail;
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "api_version", QR_ROUTE_API_VERSION);
    if (p->status != QR_ROUTE_OK) {
        struct qr_diag d;
        qr_route_plan_message(p, &d);
        yyjson_mut_val *e = yyjson_mut_obj_add_obj(doc, root, "error");
        if (!e)
            goto fail;
        yyjson_mut_obj_add_str(doc, e, "code", qr_route_status_code(p->status));
        yyjson_mut_obj_add_strcpy(doc, e, "message", d.msg);
    }
    yyjson_mut_val *plan = qr_route_plan_render(doc, p);
    if (!plan || !yyjson_mut_obj_add_val(doc, root, "plan", plan))
        goto fail;
    return doc;
fail:
    yyjson_mut_doc_free(doc);
    return NULL;
}

char *qr_route_write(const struct qr_route_plan *p, size_t *len)
{
    yyjson_mut_doc *doc = qr_route_render(p);
    if (!doc)
        return NULL;
    char *s = yyjson_mut_write(doc, 0, len);
    yyjson_mut_doc_free(doc);
    return s;
}
