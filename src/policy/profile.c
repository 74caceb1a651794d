/* Deployment profiles (profile.h): loading, validation, lookup and the /v1/deployment-profiles
 * renderer, in the 0.3 line's shape so its profile files load unchanged. */
#include "policy/profile.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/builtin.h"
#include "policy/pjson.h"

struct qr_profile_set {
    struct qr_profile *items; /* sorted by id */
    size_t n;
    yyjson_doc **docs; /* owned */
    size_t n_docs;
};

static const char *const tiers[] = {"production", "compatibility", "experimental", NULL};
static const char *const archs[] = {"any", "dense", "moe", NULL};

const char *qr_profile_tier_str(enum qr_profile_tier t)
{
    return (unsigned) t < 3 ? tiers[t] : "?";
}

const char *qr_arch_class_str(enum qr_arch_class c)
{
    return (unsigned) c < 3 ? archs[c] : "?";
}

static enum qr_err parse_hardware(struct qr_pj *pj, yyjson_val *root, struct qr_profile *p)
{
    static const char *const hw_keys[] = {"memory", "cpu", "accelerator", NULL};
    static const char *const mem_keys[] = {"minimum_bytes", "ecc_required", "preferred_class",
                                           NULL};
    static const char *const cpu_keys[] = {"minimum_physical_cores", "reference_min_clock_mhz",
                                           NULL};
    static const char *const acc_keys[] = {"required", NULL};
    yyjson_val *hw = yyjson_obj_get(root, "hardware");
    size_t m0 = qr_pj_push_key(pj, "hardware");
    enum qr_err err;
    if (!hw)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, hw, hw_keys)) != QR_OK)
        return err;
    yyjson_val *mem = yyjson_obj_get(hw, "memory"), *cpu = yyjson_obj_get(hw, "cpu"),
               *acc = yyjson_obj_get(hw, "accelerator");
    size_t m1 = qr_pj_push_key(pj, "memory");
    if (!mem)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, mem, mem_keys)) != QR_OK ||
        (err = qr_pj_u64(pj, mem, "minimum_bytes", true, 1, UINT64_MAX, &p->memory_minimum_bytes,
                         NULL)) != QR_OK ||
        (err = qr_pj_bool(pj, mem, "ecc_required", true, &p->ecc_required, NULL)) != QR_OK ||
        (err = qr_pj_str(pj, mem, "preferred_class", false, QR_PJ_MAX_ID,
                         &p->preferred_memory_class)) != QR_OK)
        return err;
    qr_pj_pop(pj, m1);
    m1 = qr_pj_push_key(pj, "cpu");
    if (!cpu)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, cpu, cpu_keys)) != QR_OK ||
        (err = qr_pj_u64(pj, cpu, "minimum_physical_cores", true, 1, 1u << 20,
                         &p->minimum_physical_cores, NULL)) != QR_OK ||
        (err = qr_pj_u64(pj, cpu, "reference_min_clock_mhz", false, 0, 1u << 20,
                         &p->reference_min_clock_mhz, &p->has_reference_clock)) != QR_OK)
        return err;
    qr_pj_pop(pj, m1);
    m1 = qr_pj_push_key(pj, "accelerator");
    if (!acc)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, acc, acc_keys)) != QR_OK ||
        (err = qr_pj_bool(pj, acc, "required", true, &p->accelerator_required, NULL)) != QR_OK)
        return err;
    qr_pj_pop(pj, m0);
    return QR_OK;
}

/* model.target: a model name as a client writes it (canonical id, alias, name:tag): non-empty,
 * printable ASCII without spaces or quotes; whether the registry resolves it is the catalog's
 * check (a problem, never fatal). */
static enum qr_err check_target(struct qr_pj *pj, const char *t)
{
    size_t mark = qr_pj_push_key(pj, "target");
    if (!t[0])
        return qr_pj_fail(pj, "must not be empty");
    for (const char *c = t; *c; c++)
        if ((unsigned char) *c <= ' ' || (unsigned char) *c >= 0x7f || *c == '"' || *c == '\\')
            return qr_pj_fail(pj, "'%s' is not a model name (character %zu)", t, (size_t) (c - t));
    qr_pj_pop(pj, mark);
    return QR_OK;
}

static enum qr_err parse_profile(struct qr_pj *pj, yyjson_val *root, struct qr_profile *p)
{
    static const char *const keys[] = {"schema_version", "id",       "display_name", "tier",
                                       "description",    "hardware", "model",        NULL};
    static const char *const model_keys[] = {"architecture_class", "target", NULL};
    const char *schema, *tier, *arch;
    enum qr_err err;
    if ((err = qr_pj_object(pj, root, keys)) != QR_OK ||
        (err = qr_pj_str(pj, root, "schema_version", true, QR_PJ_MAX_ID, &schema)) != QR_OK)
        return err;
    if (strcmp(schema, QR_PROFILE_SCHEMA) != 0) {
        qr_pj_push_key(pj, "schema_version");
        return qr_pj_fail(pj, "'%s' is not %s", schema, QR_PROFILE_SCHEMA);
    }
    if ((err = qr_pj_str(pj, root, "id", true, QR_PJ_MAX_ID, &p->id)) != QR_OK ||
        (err = qr_pj_str(pj, root, "display_name", true, QR_PJ_MAX_ID, &p->display_name)) !=
            QR_OK ||
        (err = qr_pj_str(pj, root, "tier", true, QR_PJ_MAX_ID, &tier)) != QR_OK ||
        (err = qr_pj_str(pj, root, "description", false, QR_PJ_MAX_TEXT, &p->description)) !=
            QR_OK ||
        (err = parse_hardware(pj, root, p)) != QR_OK)
        return err;
    int t = qr_pj_lookup(tier, tiers);
    if (t < 0) {
        qr_pj_push_key(pj, "tier");
        return qr_pj_fail(pj, "'%s' is not production, compatibility or experimental", tier);
    }
    p->tier = (enum qr_profile_tier) t;
    yyjson_val *model = yyjson_obj_get(root, "model");
    size_t m = qr_pj_push_key(pj, "model");
    if (!model)
        return qr_pj_fail(pj, "required");
    if ((err = qr_pj_object(pj, model, model_keys)) != QR_OK ||
        (err = qr_pj_str(pj, model, "architecture_class", true, QR_PJ_MAX_ID, &arch)) != QR_OK)
        return err;
    int a = -1;
    for (int i = 0; archs[i]; i++)
        if (strcasecmp(arch, archs[i]) == 0)
            a = i;
    if (a < 0) {
        qr_pj_push_key(pj, "architecture_class");
        return qr_pj_fail(pj, "'%s' is not dense, moe or any", arch);
    }
    p->architecture_class = (enum qr_arch_class) a;
    if ((err = qr_pj_str(pj, model, "target", false, QR_PJ_MAX_ID, &p->target)) != QR_OK)
        return err;
    if (p->target && (err = check_target(pj, p->target)) != QR_OK)
        return err;
    qr_pj_pop(pj, m);
    return QR_OK;
}

enum qr_err qr_profile_set_new(struct qr_profile_set **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? QR_OK : QR_ERR_NOMEM;
}

void qr_profile_set_free(struct qr_profile_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_docs; i++)
        yyjson_doc_free(s->docs[i]);
    free(s->docs);
    free(s->items);
    free(s);
}

enum qr_err qr_profile_set_add(struct qr_profile_set *s, const char *name, const char *json,
                               size_t len, struct qr_diag *diag)
{
    struct qr_pj pj;
    struct qr_profile p = {0};
    yyjson_doc *doc = NULL;
    qr_pj_init(&pj, name, diag);
    if (s->n >= QR_PROFILE_MAX)
        return qr_pj_fail(&pj, "more than %u profiles", QR_PROFILE_MAX);
    enum qr_err err = qr_pj_parse(&pj, json, len, &doc);
    if (err != QR_OK)
        return err;
    p.file = name;
    if ((err = parse_profile(&pj, yyjson_doc_get_root(doc), &p)) != QR_OK)
        goto fail;
    size_t at = 0;
    while (at < s->n && strcmp(s->items[at].id, p.id) < 0)
        at++;
    if (at < s->n && strcmp(s->items[at].id, p.id) == 0) {
        err = qr_pj_fail(&pj, "duplicate profile id '%s'", p.id);
        goto fail;
    }
    struct qr_profile *items = realloc(s->items, (s->n + 1) * sizeof(*items));
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
    yyjson_doc_free(doc);
    return err;
}

enum qr_err qr_profile_set_load_builtin(struct qr_profile_set **out, struct qr_diag *diag)
{
    const struct qr_builtin_file *f;
    size_t n;
    enum qr_err err = qr_profile_set_new(out);
    if (err != QR_OK)
        return err;
    qr_builtin_under("deployment-profiles/", &f, &n);
    for (size_t i = 0; i < n; i++) {
        if ((err = qr_profile_set_add(*out, f[i].path, f[i].data, f[i].len, diag)) != QR_OK) {
            qr_profile_set_free(*out);
            *out = NULL;
            return err;
        }
    }
    return QR_OK;
}

size_t qr_profile_set_count(const struct qr_profile_set *s)
{
    return s ? s->n : 0;
}

const struct qr_profile *qr_profile_set_at(const struct qr_profile_set *s, size_t i)
{
    return s && i < s->n ? &s->items[i] : NULL;
}

const struct qr_profile *qr_profile_set_find(const struct qr_profile_set *s, const char *id)
{
    if (!s || !id)
        return NULL;
    while (*id == ' ' || *id == '\t')
        id++;
    size_t n = strlen(id);
    while (n && (id[n - 1] == ' ' || id[n - 1] == '\t'))
        n--;
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->items[i].id) == n && memcmp(s->items[i].id, id, n) == 0)
            return &s->items[i];
    return NULL;
}

yyjson_mut_val *qr_profile_render(yyjson_mut_doc *d, const struct qr_profile *p)
{
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_obj_add_str(d, o, "schema_version", QR_PROFILE_SCHEMA);
    yyjson_mut_obj_add_str(d, o, "id", p->id);
    yyjson_mut_obj_add_str(d, o, "display_name", p->display_name);
    yyjson_mut_obj_add_str(d, o, "tier", qr_profile_tier_str(p->tier));
    yyjson_mut_obj_add_str(d, o, "description", p->description ? p->description : "");
    yyjson_mut_val *hw = yyjson_mut_obj_add_obj(d, o, "hardware");
    yyjson_mut_val *mem = yyjson_mut_obj_add_obj(d, hw, "memory");
    yyjson_mut_obj_add_uint(d, mem, "minimum_bytes", p->memory_minimum_bytes);
    yyjson_mut_obj_add_bool(d, mem, "ecc_required", p->ecc_required);
    if (p->preferred_memory_class)
        yyjson_mut_obj_add_str(d, mem, "preferred_class", p->preferred_memory_class);
    yyjson_mut_val *cpu = yyjson_mut_obj_add_obj(d, hw, "cpu");
    yyjson_mut_obj_add_uint(d, cpu, "minimum_physical_cores", p->minimum_physical_cores);
    if (p->reference_min_clock_mhz)
        yyjson_mut_obj_add_uint(d, cpu, "reference_min_clock_mhz", p->reference_min_clock_mhz);
    yyjson_mut_val *acc = yyjson_mut_obj_add_obj(d, hw, "accelerator");
    yyjson_mut_obj_add_bool(d, acc, "required", p->accelerator_required);
    yyjson_mut_val *model = yyjson_mut_obj_add_obj(d, o, "model");
    yyjson_mut_obj_add_str(d, model, "architecture_class",
                           qr_arch_class_str(p->architecture_class));
    if (p->target)
        yyjson_mut_obj_add_str(d, model, "target", p->target);
    return o;
}

yyjson_mut_doc *qr_profile_set_render(const struct qr_profile_set *s)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    if (!d)
        return NULL;
    yyjson_mut_val *root = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_str(d, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_str(d, root, "schema_version", QR_PROFILE_SCHEMA);
    yyjson_mut_obj_add_uint(d, root, "count", qr_profile_set_count(s));
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(d, root, "profiles");
    for (size_t i = 0; i < qr_profile_set_count(s); i++)
        yyjson_mut_arr_append(arr, qr_profile_render(d, &s->items[i]));
    return d;
}
