/* Model policies (policy.h): the loader that turns policy files into validated structs, the
 * matcher that finds the policies governing one (family, variant, backend kind, engine version,
 * hardware class), and the /v1/model-policies renderer. Unlike the 0.3 line, the hardware class
 * is part of the match (a Turin-only policy does not attach to other hosts), a version constraint
 * may narrow a policy to some engine builds, and the five classes include known-bad. */
#include "policy/policy.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/builtin.h"
#include "policy/apply.h"
#include "policy/pjson.h"
#include "policy/version.h"

struct qr_policy_set {
    struct qr_policy **items; /* sorted by id; each owned */
    size_t n;
    yyjson_doc **docs; /* owned; strings of the policies point into these */
    size_t n_docs;
};

static const char *const class_names[] = {"none",     "optional",   "known-good",
                                          "required", "unverified", "known-bad"};

const char *qr_param_class_str(enum qr_param_class c)
{
    return (unsigned) c < QR_ARRAY_LEN(class_names) ? class_names[c] : "none";
}

static bool parse_class(const char *s, enum qr_param_class *out, bool *legacy)
{
    *legacy = false;
    for (unsigned i = 1; i < QR_ARRAY_LEN(class_names); i++) {
        if (strcmp(s, class_names[i]) == 0) {
            *out = (enum qr_param_class) i;
            return true;
        }
    }
    if (strcmp(s, "blocked-unverified") == 0) {
        *out = QR_PARAM_UNVERIFIED;
        *legacy = true;
        return true;
    }
    return false;
}

static void policy_free(struct qr_policy *p)
{
    if (!p)
        return;
    free(p->variants);
    free(p->unclassified_variants);
    free(p->engine_versions);
    free(p->params);
    free(p->sources);
    free(p);
}

/* ids: letters, digits and "-_.:", so they are safe in URLs, logs and file names */
static bool id_ok(const char *s)
{
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == ':'))
            return false;
    }
    return true;
}

static enum qr_err check_id(struct qr_pj *pj, const char *key, const char *v)
{
    if (v && !id_ok(v)) {
        qr_pj_push_key(pj, key);
        return qr_pj_fail(pj, "'%s' may hold only letters, digits and '-_.:'", v);
    }
    return QR_OK;
}

/* A value given for a knob the Runtime knows must have the knob's type. */
static enum qr_err check_value(struct qr_pj *pj, const char *name, yyjson_val *v)
{
    int k = qr_knob_find(name);
    if (!v || k < 0) {
        if (v && (yyjson_is_obj(v) || yyjson_is_arr(v)))
            return qr_pj_fail(pj, "value of an unknown knob must be a scalar");
        return QR_OK;
    }
    switch (qr_knob_type((enum qr_knob) k)) {
    case QR_KNOB_TYPE_F64:
        if (!yyjson_is_num(v))
            return qr_pj_fail(pj, "'%s' takes a number", name);
        break;
    case QR_KNOB_TYPE_I64:
        if (!yyjson_is_int(v) || (yyjson_is_uint(v) && yyjson_get_uint(v) > INT64_MAX))
            return qr_pj_fail(pj, "'%s' takes an integer", name);
        break;
    case QR_KNOB_TYPE_STRS:
        if (yyjson_is_str(v))
            break;
        if (!yyjson_is_arr(v) || yyjson_arr_size(v) > 16)
            return qr_pj_fail(pj, "'%s' takes a string or up to 16 strings", name);
        for (size_t i = 0; i < yyjson_arr_size(v); i++)
            if (!yyjson_is_str(yyjson_arr_get(v, i)))
                return qr_pj_fail(pj, "'%s' takes a string or up to 16 strings", name);
        break;
    }
    return QR_OK;
}

static enum qr_err parse_params(struct qr_pj *pj, yyjson_val *root, struct qr_policy *p)
{
    static const char *const keys[] = {"name", "class", "value", "note", NULL};
    yyjson_val *arr;
    size_t n;
    if (!yyjson_obj_get(root, "parameters")) { /* required, but may be empty */
        qr_pj_push_key(pj, "parameters");
        return qr_pj_fail(pj, "required");
    }
    enum qr_err err = qr_pj_array(pj, root, "parameters", false, QR_POLICY_MAX_PARAMS, &arr, &n);
    if (err != QR_OK)
        return err;
    p->params = calloc(n ? n : 1, sizeof(*p->params));
    if (!p->params)
        return QR_ERR_NOMEM;
    size_t mark = qr_pj_push_key(pj, "parameters");
    for (size_t i = 0; i < n; i++) {
        struct qr_policy_param *q = &p->params[i];
        yyjson_val *o = yyjson_arr_get(arr, i);
        const char *cls;
        size_t mi = qr_pj_push_idx(pj, i);
        if ((err = qr_pj_object(pj, o, keys)) != QR_OK ||
            (err = qr_pj_str(pj, o, "name", true, QR_PJ_MAX_ID, &q->name)) != QR_OK ||
            (err = qr_pj_str(pj, o, "class", true, QR_PJ_MAX_ID, &cls)) != QR_OK ||
            (err = qr_pj_str(pj, o, "note", false, QR_PJ_MAX_TEXT, &q->note)) != QR_OK)
            return err;
        if (!parse_class(cls, &q->cls, &q->legacy_blocked)) {
            qr_pj_push_key(pj, "class");
            return qr_pj_fail(pj,
                              "unknown class '%s' (required, known-good, optional, known-bad, "
                              "unverified)",
                              cls);
        }
        q->value = yyjson_obj_get(o, "value");
        if (q->value && yyjson_is_null(q->value))
            q->value = NULL;
        size_t mv = qr_pj_push_key(pj, "value");
        if ((err = check_value(pj, q->name, q->value)) != QR_OK)
            return err;
        qr_pj_pop(pj, mv);
        if (q->cls == QR_PARAM_REQUIRED && !q->value)
            return qr_pj_fail(pj, "a required parameter needs a value");
        int k = qr_knob_find(q->name);
        for (size_t j = 0; j < i; j++) {
            int kj = qr_knob_find(p->params[j].name);
            if (strcmp(p->params[j].name, q->name) == 0 || (k >= 0 && k == kj))
                return qr_pj_fail(pj, "parameter '%s' named twice", q->name);
        }
        qr_pj_pop(pj, mi);
    }
    qr_pj_pop(pj, mark);
    p->n_params = n;
    return QR_OK;
}

static enum qr_err parse_context(struct qr_pj *pj, yyjson_val *root, struct qr_policy *p)
{
    static const char *const keys[] = {"backend_managed", "override_supported", "override_verified",
                                       "native_max",      "requested_limit",    NULL};
    struct qr_policy_context *c = &p->context;
    yyjson_val *o = yyjson_obj_get(root, "context");
    size_t mark = qr_pj_push_key(pj, "context");
    enum qr_err err;
    if (!o)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, o, keys)) != QR_OK ||
        (err = qr_pj_bool(pj, o, "backend_managed", true, &c->backend_managed, NULL)) != QR_OK ||
        (err = qr_pj_bool(pj, o, "override_supported", true, &c->override_supported, NULL)) !=
            QR_OK ||
        (err = qr_pj_bool(pj, o, "override_verified", true, &c->override_verified, NULL)) !=
            QR_OK ||
        (err = qr_pj_u64(pj, o, "native_max", false, 0, UINT32_MAX, &c->native_max,
                         &c->has_native_max)) != QR_OK ||
        (err = qr_pj_u64(pj, o, "requested_limit", false, 1, UINT32_MAX, &c->requested_limit,
                         &c->has_requested_limit)) != QR_OK)
        return err;
    if (c->override_verified && !c->override_supported)
        return qr_pj_fail(pj, "override_verified requires override_supported");
    if (c->has_native_max && c->native_max > 0 && c->has_requested_limit &&
        c->requested_limit > c->native_max)
        return qr_pj_fail(pj, "requested_limit %llu exceeds native_max %llu",
                          (unsigned long long) c->requested_limit,
                          (unsigned long long) c->native_max);
    qr_pj_pop(pj, mark);
    return QR_OK;
}

static enum qr_err parse_validation(struct qr_pj *pj, yyjson_val *root, struct qr_policy *p)
{
    static const char *const keys[] = {"observed_date", "sources", "notes", NULL};
    yyjson_val *o = yyjson_obj_get(root, "validation");
    size_t mark = qr_pj_push_key(pj, "validation");
    enum qr_err err;
    if (!o)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, o, keys)) != QR_OK ||
        (err = qr_pj_str(pj, o, "observed_date", true, 10, &p->observed_date)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "sources", true, true, 32, QR_PJ_MAX_TEXT, &p->sources,
                          &p->n_sources)) != QR_OK ||
        (err = qr_pj_str(pj, o, "notes", false, QR_PJ_MAX_TEXT, &p->notes)) != QR_OK)
        return err;
    if (!qr_pj_is_date(p->observed_date)) {
        qr_pj_push_key(pj, "observed_date");
        return qr_pj_fail(pj, "'%s' is not a YYYY-MM-DD date", p->observed_date);
    }
    qr_pj_pop(pj, mark);
    return QR_OK;
}

static enum qr_err parse_lists(struct qr_pj *pj, yyjson_val *root, struct qr_policy *p)
{
    enum qr_err err;
    if ((err = qr_pj_strs(pj, root, "variants", true, true, 64, QR_PJ_MAX_ID, &p->variants,
                          &p->n_variants)) != QR_OK ||
        (err = qr_pj_strs(pj, root, "unclassified_variants", false, true, 64, QR_PJ_MAX_ID,
                          &p->unclassified_variants, &p->n_unclassified)) != QR_OK ||
        (err = qr_pj_strs(pj, root, "engine_versions", false, true, 16, QR_PJ_MAX_ID,
                          &p->engine_versions, &p->n_engine_versions)) != QR_OK)
        return err;
    for (size_t i = 0; i < p->n_unclassified; i++) {
        for (size_t j = 0; j < p->n_variants; j++) {
            if (strcasecmp(p->unclassified_variants[i], p->variants[j]) == 0 ||
                strcmp(p->unclassified_variants[i], "*") == 0) {
                qr_pj_push_key(pj, "unclassified_variants");
                qr_pj_push_idx(pj, i);
                return qr_pj_fail(pj, "'%s' is also a covered variant",
                                  p->unclassified_variants[i]);
            }
        }
    }
    for (size_t i = 0; i < p->n_engine_versions; i++) {
        if (!qr_version_constraint_valid(p->engine_versions[i])) {
            qr_pj_push_key(pj, "engine_versions");
            qr_pj_push_idx(pj, i);
            return qr_pj_fail(pj, "'%s' is not a version constraint", p->engine_versions[i]);
        }
    }
    return QR_OK;
}

static enum qr_err parse_policy(struct qr_pj *pj, yyjson_val *root, struct qr_policy *p)
{
    static const char *const keys[] = {"schema_version",
                                       "id",
                                       "model_family",
                                       "variants",
                                       "unclassified_variants",
                                       "backend_kind",
                                       "engine_versions",
                                       "hardware_class",
                                       "renderer",
                                       "parser",
                                       "context",
                                       "parameters",
                                       "unlisted_parameters",
                                       "fill_known_good",
                                       "validation",
                                       NULL};
    const char *schema, *unlisted = NULL;
    enum qr_err err;
    if ((err = qr_pj_object(pj, root, keys)) != QR_OK ||
        (err = qr_pj_str(pj, root, "schema_version", true, QR_PJ_MAX_ID, &schema)) != QR_OK)
        return err;
    if (strcmp(schema, QR_POLICY_SCHEMA) != 0) {
        qr_pj_push_key(pj, "schema_version");
        return qr_pj_fail(pj, "'%s' is not %s", schema, QR_POLICY_SCHEMA);
    }
    if ((err = qr_pj_str(pj, root, "id", true, QR_PJ_MAX_ID, &p->id)) != QR_OK ||
        (err = check_id(pj, "id", p->id)) != QR_OK ||
        (err = qr_pj_str(pj, root, "model_family", true, QR_PJ_MAX_ID, &p->model_family)) !=
            QR_OK ||
        (err = qr_pj_str(pj, root, "backend_kind", true, QR_PJ_MAX_ID, &p->backend_kind)) !=
            QR_OK ||
        (err = qr_pj_str(pj, root, "hardware_class", true, QR_PJ_MAX_ID, &p->hardware_class)) !=
            QR_OK ||
        (err = qr_pj_str(pj, root, "renderer", false, QR_PJ_MAX_ID, &p->renderer)) != QR_OK ||
        (err = qr_pj_str(pj, root, "parser", false, QR_PJ_MAX_ID, &p->parser)) != QR_OK ||
        (err = qr_pj_str(pj, root, "unlisted_parameters", false, QR_PJ_MAX_ID, &unlisted)) !=
            QR_OK ||
        (err = qr_pj_bool(pj, root, "fill_known_good", false, &p->fill_known_good, NULL)) !=
            QR_OK ||
        (err = parse_lists(pj, root, p)) != QR_OK || (err = parse_context(pj, root, p)) != QR_OK ||
        (err = parse_params(pj, root, p)) != QR_OK ||
        (err = parse_validation(pj, root, p)) != QR_OK)
        return err;
    p->unlisted = QR_PARAM_UNVERIFIED;
    if (unlisted) {
        if (strcmp(unlisted, "optional") == 0) {
            p->unlisted = QR_PARAM_OPTIONAL;
        } else if (strcmp(unlisted, "unverified") != 0) {
            qr_pj_push_key(pj, "unlisted_parameters");
            return qr_pj_fail(pj, "'%s' must be unverified or optional", unlisted);
        }
    }
    return QR_OK;
}

enum qr_err qr_policy_set_new(struct qr_policy_set **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? QR_OK : QR_ERR_NOMEM;
}

void qr_policy_set_free(struct qr_policy_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        policy_free(s->items[i]);
    for (size_t i = 0; i < s->n_docs; i++)
        yyjson_doc_free(s->docs[i]);
    free(s->items);
    free(s->docs);
    free(s);
}

enum qr_err qr_policy_set_add(struct qr_policy_set *s, const char *name, const char *json,
                              size_t len, struct qr_diag *diag)
{
    struct qr_pj pj;
    yyjson_doc *doc = NULL;
    struct qr_policy *p = NULL;
    qr_pj_init(&pj, name, diag);
    if (s->n >= QR_POLICY_MAX)
        return qr_pj_fail(&pj, "more than %u policies", QR_POLICY_MAX);
    enum qr_err err = qr_pj_parse(&pj, json, len, &doc);
    if (err != QR_OK)
        return err;
    p = calloc(1, sizeof(*p));
    if (!p) {
        err = QR_ERR_NOMEM;
        goto fail;
    }
    p->file = name;
    if ((err = parse_policy(&pj, yyjson_doc_get_root(doc), p)) != QR_OK)
        goto fail;
    size_t at = 0;
    while (at < s->n && strcmp(s->items[at]->id, p->id) < 0)
        at++;
    if (at < s->n && strcmp(s->items[at]->id, p->id) == 0) {
        err = qr_pj_fail(&pj, "duplicate policy id '%s' (also in '%s')", p->id,
                         s->items[at]->file ? s->items[at]->file : "?");
        goto fail;
    }
    struct qr_policy **items = realloc(s->items, (s->n + 1) * sizeof(*items));
    if (!items) {
        err = QR_ERR_NOMEM;
        goto fail;
    }
    s->items = items;
    yyjson_doc **docs = realloc(s->docs, (s->n_docs + 1) * sizeof(*docs));
    if (!docs) {
        err = QR_ERR_NOMEM;
        goto fail;
    }
    s->docs = docs;
    memmove(&s->items[at + 1], &s->items[at], (s->n - at) * sizeof(*items));
    s->items[at] = p;
    s->n++;
    s->docs[s->n_docs++] = doc;
    return QR_OK;
fail:
    policy_free(p);
    yyjson_doc_free(doc);
    return err;
}

enum qr_err qr_policy_set_load_builtin(struct qr_policy_set **out, struct qr_diag *diag)
{
    const struct qr_builtin_file *f;
    size_t n;
    enum qr_err err = qr_policy_set_new(out);
    if (err != QR_OK)
        return err;
    qr_builtin_under("policies/", &f, &n);
    for (size_t i = 0; i < n; i++) {
        err = qr_policy_set_add(*out, f[i].path, f[i].data, f[i].len, diag);
        if (err != QR_OK) {
            qr_policy_set_free(*out);
            *out = NULL;
            return err;
        }
    }
    return QR_OK;
}

size_t qr_policy_set_count(const struct qr_policy_set *s)
{
    return s ? s->n : 0;
}

const struct qr_policy *qr_policy_set_at(const struct qr_policy_set *s, size_t i)
{
    return s && i < s->n ? s->items[i] : NULL;
}

const struct qr_policy *qr_policy_set_find(const struct qr_policy_set *s, const char *id)
{
    for (size_t i = 0; s && id && i < s->n; i++)
        if (strcmp(s->items[i]->id, id) == 0)
            return s->items[i];
    return NULL;
}

static bool is_any(const char *s)
{
    return strcmp(s, "*") == 0 || strcmp(s, "any") == 0;
}

bool qr_policy_matches(const struct qr_policy *p, const struct qr_policy_target *t)
{
    if (!t->model_family || strcasecmp(p->model_family, t->model_family) != 0)
        return false;
    if (!t->backend_kind || strcmp(p->backend_kind, t->backend_kind) != 0)
        return false;
    if (!is_any(p->hardware_class) &&
        (!t->hardware_class || strcmp(p->hardware_class, t->hardware_class) != 0))
        return false;
    bool variant = false;
    for (size_t i = 0; i < p->n_variants && !variant; i++)
        variant = strcmp(p->variants[i], "*") == 0 ||
                  (t->variant && strcasecmp(p->variants[i], t->variant) == 0);
    for (size_t i = 0; i < p->n_unclassified && t->variant; i++)
        if (strcasecmp(p->unclassified_variants[i], t->variant) == 0)
            variant = false;
    if (!variant)
        return false;
    return qr_version_list_match(p->engine_versions, p->n_engine_versions, t->engine_versions,
                                 t->n_engine_versions);
}

size_t qr_policy_match(const struct qr_policy_set *s, const struct qr_policy_target *t,
                       const struct qr_policy **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; s && i < s->n; i++) {
        if (!qr_policy_matches(s->items[i], t))
            continue;
        if (n < max)
            out[n] = s->items[i];
        n++;
    }
    return n;
}

/* --- rendering ------------------------------------------------------------------------------ */

static void add_strs(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key, const char **v,
                     size_t n, bool always)
{
    if (!n && !always)
        return;
    yyjson_mut_val *a = yyjson_mut_arr(d);
    for (size_t i = 0; i < n; i++)
        yyjson_mut_arr_add_str(d, a, v[i]);
    yyjson_mut_obj_add_val(d, o, key, a);
}

static void add_str_opt(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key, const char *v)
{
    if (v)
        yyjson_mut_obj_add_str(d, o, key, v);
}

yyjson_mut_val *qr_policy_render(yyjson_mut_doc *d, const struct qr_policy *p)
{
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_obj_add_str(d, o, "schema_version", QR_POLICY_SCHEMA);
    yyjson_mut_obj_add_str(d, o, "id", p->id);
    yyjson_mut_obj_add_str(d, o, "model_family", p->model_family);
    add_strs(d, o, "variants", p->variants, p->n_variants, true);
    add_strs(d, o, "unclassified_variants", p->unclassified_variants, p->n_unclassified, false);
    yyjson_mut_obj_add_str(d, o, "backend_kind", p->backend_kind);
    add_strs(d, o, "engine_versions", p->engine_versions, p->n_engine_versions, false);
    yyjson_mut_obj_add_str(d, o, "hardware_class", p->hardware_class);
    add_str_opt(d, o, "renderer", p->renderer);
    add_str_opt(d, o, "parser", p->parser);
    yyjson_mut_val *c = yyjson_mut_obj_add_obj(d, o, "context");
    yyjson_mut_obj_add_bool(d, c, "backend_managed", p->context.backend_managed);
    yyjson_mut_obj_add_bool(d, c, "override_supported", p->context.override_supported);
    yyjson_mut_obj_add_bool(d, c, "override_verified", p->context.override_verified);
    if (p->context.has_native_max)
        yyjson_mut_obj_add_uint(d, c, "native_max", p->context.native_max);
    if (p->context.has_requested_limit)
        yyjson_mut_obj_add_uint(d, c, "requested_limit", p->context.requested_limit);
    yyjson_mut_val *params = yyjson_mut_obj_add_arr(d, o, "parameters");
    for (size_t i = 0; i < p->n_params; i++) {
        const struct qr_policy_param *q = &p->params[i];
        yyjson_mut_val *e = yyjson_mut_arr_add_obj(d, params);
        yyjson_mut_obj_add_str(d, e, "name", q->name);
        yyjson_mut_obj_add_str(d, e, "class", qr_param_class_str(q->cls));
        if (q->value)
            yyjson_mut_obj_add_val(d, e, "value", yyjson_val_mut_copy(d, q->value));
        add_str_opt(d, e, "note", q->note);
    }
    yyjson_mut_obj_add_str(d, o, "unlisted_parameters", qr_param_class_str(p->unlisted));
    yyjson_mut_obj_add_bool(d, o, "fill_known_good", p->fill_known_good);
    yyjson_mut_val *v = yyjson_mut_obj_add_obj(d, o, "validation");
    yyjson_mut_obj_add_str(d, v, "observed_date", p->observed_date);
    add_strs(d, v, "sources", p->sources, p->n_sources, true);
    add_str_opt(d, v, "notes", p->notes);
    return o;
}

yyjson_mut_doc *qr_policy_set_render(const struct qr_policy_set *s)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    if (!d)
        return NULL;
    yyjson_mut_val *root = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_str(d, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_str(d, root, "schema_version", QR_POLICY_SCHEMA);
    yyjson_mut_obj_add_uint(d, root, "count", qr_policy_set_count(s));
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(d, root, "policies");
    for (size_t i = 0; i < qr_policy_set_count(s); i++)
        yyjson_mut_arr_append(arr, qr_policy_render(d, s->items[i]));
    return d;
}
