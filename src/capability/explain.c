/* Capability evaluations rendered as JSON for the router's plan and rejection explanations: each
 * key with its effective state, whether conformance verified it, the rule that decided and every
 * piece of evidence that was considered. Strings are copied into the caller's document, so the
 * evidence may die before the document is written. */
#include "capability/capability.h"

#include <yyjson.h>

yyjson_mut_val *qr_cap_eval_to_json(const struct qr_cap_eval *e, yyjson_mut_doc *doc)
{
    yyjson_mut_val *obj = yyjson_mut_obj(doc);
    yyjson_mut_val *reasons = yyjson_mut_arr(doc);
    if (!obj || !reasons)
        return NULL;
    bool ok = yyjson_mut_obj_add_str(doc, obj, "key", qr_cap_key_name(e->key)) &&
              yyjson_mut_obj_add_str(doc, obj, "state", qr_cap_state_str(e->state)) &&
              yyjson_mut_obj_add_bool(doc, obj, "verified", e->verified) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "rule", e->rule ? e->rule : "");
    size_t n = e->n_reasons <= QR_CAP_SRC__COUNT ? e->n_reasons : QR_CAP_SRC__COUNT;
    for (size_t i = 0; ok && i < n; i++) {
        const struct qr_cap_reason *r = &e->reasons[i];
        yyjson_mut_val *ro = yyjson_mut_arr_add_obj(doc, reasons);
        ok = ro && yyjson_mut_obj_add_str(doc, ro, "source", qr_cap_source_str(r->source)) &&
             yyjson_mut_obj_add_str(doc, ro, "state", qr_cap_state_str(r->state)) &&
             yyjson_mut_obj_add_strcpy(doc, ro, "detail", r->detail ? r->detail : "");
    }
    ok = ok && yyjson_mut_obj_add_val(doc, obj, "reasons", reasons);
    return ok ? obj : NULL;
}

yyjson_mut_val *qr_cap_result_to_json(const struct qr_cap_result *res,
                                      const struct qr_cap_set *only, yyjson_mut_doc *doc)
{
    struct qr_cap_set all = {(UINT64_C(1) << QR_CAP__COUNT) - 1};
    enum qr_cap_key keys[QR_CAP__COUNT];
    size_t n = qr_cap_set_sorted(only ? *only : all, keys);
    yyjson_mut_val *arr = yyjson_mut_arr(doc);
    for (size_t i = 0; arr && i < n; i++) {
        yyjson_mut_val *v = qr_cap_eval_to_json(&res->keys[keys[i]], doc);
        if (!v || !yyjson_mut_arr_append(arr, v))
            return NULL;
    }
    return arr;
}

yyjson_mut_val *qr_cap_set_to_json(struct qr_cap_set s, yyjson_mut_doc *doc)
{
    enum qr_cap_key keys[QR_CAP__COUNT];
    size_t n = qr_cap_set_sorted(s, keys);
    yyjson_mut_val *arr = yyjson_mut_arr(doc);
    for (size_t i = 0; arr && i < n; i++) {
        if (!yyjson_mut_arr_add_str(doc, arr, qr_cap_key_name(keys[i])))
            return NULL;
    }
    return arr;
}
