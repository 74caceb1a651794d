/* Schema and code cannot drift: the validator's field table (qr_manifest_schema) and the published
 * JSON schema list the same members at every level, with the same required members, types,
 * enums, ranges, lengths and pattern definitions; every object in the schema has
 * additionalProperties false; and every manifest the validator accepts here (the builtins, the
 * manifest using every field) has only members the schema lists. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "core/builtin.h"
#include "registry/manifest.h"
#include "manifest_fixture.h"
#include "schema_check.h"

static const char *type_of(yyjson_val *n)
{
    return yyjson_get_str(yyjson_obj_get(n, "type"));
}

static void expect_type(yyjson_val *n, const char *want, const char *path)
{
    const char *t = type_of(n);
    if (!t || strcmp(t, want) != 0)
        fail_msg("%s: schema type '%s', the validator has '%s'", path, t ? t : "(none)", want);
}

static void expect_num(yyjson_val *n, const char *key, double want, const char *path)
{
    yyjson_val *v = yyjson_obj_get(n, key);
    if (!v || yyjson_get_num(v) != want)
        fail_msg("%s: schema %s %g, the validator has %g", path, key, v ? yyjson_get_num(v) : -1.0,
                 want);
}

static void cmp_enum(const struct qr_manifest_field *f, yyjson_val *n, const char *path)
{
    yyjson_val *c = yyjson_obj_get(n, "const");
    if (c) {
        if (!f->enums[0] || f->enums[1] || strcmp(f->enums[0], yyjson_get_str(c)) != 0)
            fail_msg("%s: const differs", path);
        return;
    }
    yyjson_val *e = yyjson_obj_get(n, "enum");
    size_t k = 0;
    if (!e)
        fail_msg("%s: the schema has no enum", path);
    for (; f->enums[k]; k++) {
        bool found = false;
        for (size_t i = 0; i < yyjson_arr_size(e); i++)
            found |= !strcmp(yyjson_get_str(yyjson_arr_get(e, i)), f->enums[k]);
        if (!found)
            fail_msg("%s: '%s' not in the schema's enum", path, f->enums[k]);
    }
    if (k != yyjson_arr_size(e))
        fail_msg("%s: the schema's enum has %zu values, the validator %zu", path,
                 yyjson_arr_size(e), k);
}

static void cmp_str(const struct qr_manifest_field *f, yyjson_val *n, const char *ref,
                    const char *path)
{
    static const char *const REF[] = {
        [QR_CK_ID] = "id",         [QR_CK_ALIAS] = "alias",   [QR_CK_LABEL] = "label",
        [QR_CK_DIGEST] = "digest", [QR_CK_SEMVER] = "semver", [QR_CK_URI] = "uri",
    };
    if (f->enums) {
        cmp_enum(f, n, path);
        return;
    }
    expect_type(n, "string", path);
    const char *want = (size_t) f->check < sizeof REF / sizeof REF[0] ? REF[f->check] : NULL;
    if (want) {
        if (!ref || strcmp(ref, want) != 0)
            fail_msg("%s: schema $ref '%s', the validator checks '%s'", path, ref ? ref : "-",
                     want);
        return;
    }
    if (ref)
        fail_msg("%s: schema $ref '%s' for a check without a definition", path, ref);
    if (f->check == QR_CK_TEXT) {
        expect_num(n, "minLength", f->min, path);
        expect_num(n, "maxLength", f->max, path);
    } else if (f->check == QR_CK_NONE) {
        expect_num(n, "maxLength", f->max, path);
    } else if (f->check == QR_CK_RFC3339) {
        assert_string_equal(yyjson_get_str(yyjson_obj_get(n, "format")), "date-time");
    } else {
        assert_non_null(yyjson_obj_get(n, "pattern"));
    }
}

static void cmp_field(yyjson_doc *schema, const struct qr_manifest_field *f, yyjson_val *node,
                      const char *path);

static void cmp_obj(yyjson_doc *schema, const struct qr_manifest_field *t, yyjson_val *n,
                    const char *path)
{
    expect_type(n, "object", path);
    if (!yyjson_is_false(yyjson_obj_get(n, "additionalProperties")))
        fail_msg("%s: additionalProperties is not false", path);
    yyjson_val *props = yyjson_obj_get(n, "properties"), *req = yyjson_obj_get(n, "required");
    size_t nt = 0, nreq = 0;
    char sub[512];
    for (; t[nt].name; nt++) {
        snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", t[nt].name);
        yyjson_val *p = yyjson_obj_get(props, t[nt].name);
        if (!p)
            fail_msg("%s: the validator knows it, the schema does not", sub);
        bool in_req = false;
        for (size_t i = 0; i < yyjson_arr_size(req); i++)
            in_req |= !strcmp(yyjson_get_str(yyjson_arr_get(req, i)), t[nt].name);
        if (in_req != t[nt].required)
            fail_msg("%s: required in %s only", sub, in_req ? "the schema" : "the validator");
        nreq += in_req;
        cmp_field(schema, &t[nt], p, sub);
    }
    if (yyjson_obj_size(props) != nt)
        fail_msg("%s: the schema lists %zu properties, the validator %zu", path,
                 yyjson_obj_size(props), nt);
    assert_int_equal(nreq, yyjson_arr_size(req));
}

static void cmp_field(yyjson_doc *schema, const struct qr_manifest_field *f, yyjson_val *node,
                      const char *path)
{
    const char *ref;
    yyjson_val *n = schema_deref(schema, node, &ref);
    char sub[512];
    switch (f->kind) {
    case QR_MF_OBJ:
        cmp_obj(schema, f->sub, n, path);
        break;
    case QR_MF_ARR:
        expect_type(n, "array", path);
        if (f->min > 0)
            expect_num(n, "minItems", f->min, path);
        expect_num(n, "maxItems", f->max, path);
        snprintf(sub, sizeof sub, "%s[]", path);
        cmp_field(schema, f->sub, yyjson_obj_get(n, "items"), sub);
        if (f->sub->kind == QR_MF_STR && !yyjson_is_true(yyjson_obj_get(n, "uniqueItems")))
            fail_msg("%s: the validator rejects duplicate strings, the schema lacks uniqueItems",
                     path);
        break;
    case QR_MF_STR:
        cmp_str(f, n, ref, path);
        break;
    case QR_MF_INT:
    case QR_MF_NUM:
        expect_type(n, f->kind == QR_MF_INT ? "integer" : "number", path);
        expect_num(n, "minimum", f->min, path);
        expect_num(n, "maximum", f->max, path);
        break;
    case QR_MF_BOOL:
        expect_type(n, "boolean", path);
        break;
    }
}

static void test_table_equals_schema(void **state)
{
    (void) state;
    yyjson_doc *schema = schema_load();
    yyjson_val *root = yyjson_doc_get_root(schema);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "$schema")),
                        "https://json-schema.org/draft/2020-12/schema");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "$id")),
                        "https://starlight-unit.de/schemas/quantum-runtime/"
                        "model-manifest-v1alpha1.schema.json");
    cmp_obj(schema, qr_manifest_schema(), root, "");
    yyjson_doc_free(schema);
}

static void test_accepted_manifests_fit_schema(void **state)
{
    (void) state;
    yyjson_doc *schema = schema_load();
    const struct qr_builtin_file *f;
    size_t n;
    qr_builtin_under("models/", &f, &n);
    for (size_t i = 0; i < n; i++) {
        struct qr_manifest *m;
        struct qr_diag d = {{0}};
        assert_int_equal(qr_manifest_parse(f[i].data, f[i].len, &d, &m), QR_OK);
        qr_manifest_free(m);
        schema_check_json(schema, f[i].data, f[i].len, f[i].path);
    }
    struct qr_manifest *m;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_manifest_parse(RICH, strlen(RICH), &d, &m), QR_OK);
    qr_manifest_free(m);
    schema_check_json(schema, RICH, strlen(RICH), "rich");
    yyjson_doc_free(schema);
}

/* The check itself can fail: a member the schema does not list is caught. */
static void test_check_catches_extra(void **state)
{
    (void) state;
    yyjson_doc *schema = schema_load();
    yyjson_val *root = yyjson_doc_get_root(schema);
    yyjson_val *model = yyjson_obj_get(yyjson_obj_get(root, "properties"), "model");
    yyjson_val *props = yyjson_obj_get(schema_deref(schema, model, NULL), "properties");
    assert_non_null(yyjson_obj_get(props, "architecture_contract"));
    assert_null(yyjson_obj_get(props, "not_a_field"));
    yyjson_doc_free(schema);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_equals_schema),
        cmocka_unit_test(test_accepted_manifests_fit_schema),
        cmocka_unit_test(test_check_catches_extra),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
