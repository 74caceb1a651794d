/* The published manifest schema (schema/model-manifest-v1alpha1.schema.json) read with yyjson, and
 * a structural check of a manifest instance against it: every object member the instance has is
 * listed in the schema's `properties` at that place (following $ref and array `items`). Shared by
 * the registry tests so that every manifest the validator accepts is also checked against the
 * published schema. */
#ifndef QR_TEST_SCHEMA_CHECK_H
#define QR_TEST_SCHEMA_CHECK_H

#include <stdio.h>
#include <string.h>

#include <yyjson.h>

#define SCHEMA_PATH QR_TEST_CASES "/../../schema/model-manifest-v1alpha1.schema.json"

static yyjson_doc *schema_load(void)
{
    yyjson_read_err err;
    yyjson_doc *doc = yyjson_read_file(SCHEMA_PATH, 0, NULL, &err);
    if (!doc)
        fail_msg("%s: %s at %zu", SCHEMA_PATH, err.msg, err.pos);
    return doc;
}

/* The node a schema node stands for: itself, or its "$ref" into #/$defs/. */
static yyjson_val *schema_deref(yyjson_doc *schema, yyjson_val *node, const char **ref_name)
{
    yyjson_val *ref = yyjson_obj_get(node, "$ref");
    if (ref_name)
        *ref_name = NULL;
    if (!ref)
        return node;
    const char *r = yyjson_get_str(ref);
    assert_non_null(r);
    assert_true(strncmp(r, "#/$defs/", 8) == 0);
    if (ref_name)
        *ref_name = r + 8;
    yyjson_val *d = yyjson_obj_get(yyjson_obj_get(yyjson_doc_get_root(schema), "$defs"), r + 8);
    assert_non_null(d);
    return d;
}

/* Fail (naming the path) when the instance v has an object member the schema node does not list. */
static void schema_check_instance(yyjson_doc *schema, yyjson_val *node, yyjson_val *v,
                                  const char *path)
{
    node = schema_deref(schema, node, NULL);
    char sub[512];
    if (yyjson_is_obj(v)) {
        yyjson_val *props = yyjson_obj_get(node, "properties");
        if (!props)
            fail_msg("%s: an object where the schema has no properties", path);
        assert_true(yyjson_get_bool(yyjson_obj_get(node, "additionalProperties")) == false &&
                    yyjson_is_false(yyjson_obj_get(node, "additionalProperties")));
        yyjson_obj_iter it;
        yyjson_val *k;
        yyjson_obj_iter_init(v, &it);
        while ((k = yyjson_obj_iter_next(&it))) {
            const char *name = yyjson_get_str(k);
            yyjson_val *p = yyjson_obj_get(props, name);
            snprintf(sub, sizeof sub, "%s.%s", path, name ? name : "?");
            if (!p)
                fail_msg("%s: not in the published schema", sub);
            schema_check_instance(schema, p, yyjson_obj_iter_get_val(k), sub);
        }
    } else if (yyjson_is_arr(v)) {
        yyjson_val *items = yyjson_obj_get(node, "items");
        if (!items)
            fail_msg("%s: an array where the schema has no items", path);
        for (size_t i = 0; i < yyjson_arr_size(v); i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            schema_check_instance(schema, items, yyjson_arr_get(v, i), sub);
        }
    }
}

static void schema_check_json(yyjson_doc *schema, const char *json, size_t len, const char *what)
{
    yyjson_doc *doc = yyjson_read(json, len, 0);
    if (!doc)
        fail_msg("%s: not JSON", what);
    schema_check_instance(schema, yyjson_doc_get_root(schema), yyjson_doc_get_root(doc), what);
    yyjson_doc_free(doc);
}

#endif
