/* Model policies: the builtin Gemma 4 on Ollama policy and the 0.3 line's verbatim file load;
 * validation rejects what it must with the JSON path in the message; matching checks family,
 * variant (with "*" and unclassified variants), backend kind, engine version and - unlike 0.3 -
 * the host's hardware class; the /v1/model-policies renderer keeps the file's shape. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

/* The 0.3 line's internal/modelpolicy/data/gemma4-ollama-turin.json, verbatim. */
static const char legacy_policy[] =
    "{\n"
    "  \"schema_version\": \"quantum.runtime/model-policy/v1alpha1\",\n"
    "  \"id\": \"gemma4-ollama-turin-minimal\",\n"
    "  \"model_family\": \"gemma4\",\n"
    "  \"variants\": [\"e2b\", \"e4b\", \"26b-a4b\", \"profile_dependent\"],\n"
    "  \"backend_kind\": \"ollama-adapter\",\n"
    "  \"hardware_class\": \"amd-epyc-turin-cpu\",\n"
    "  \"renderer\": \"gemma4\",\n"
    "  \"parser\": \"gemma4\",\n"
    "  \"context\": {\"backend_managed\": true, \"override_supported\": true, "
    "\"override_verified\": false},\n"
    "  \"parameters\": [\n"
    "    {\"name\": \"temperature\", \"class\": \"known-good\", \"value\": 1.0},\n"
    "    {\"name\": \"top_k\", \"class\": \"known-good\", \"value\": 64},\n"
    "    {\"name\": \"top_p\", \"class\": \"known-good\", \"value\": 0.95},\n"
    "    {\"name\": \"num_ctx\", \"class\": \"blocked-unverified\"},\n"
    "    {\"name\": \"num_predict\", \"class\": \"blocked-unverified\"},\n"
    "    {\"name\": \"num_thread\", \"class\": \"blocked-unverified\"},\n"
    "    {\"name\": \"repeat_penalty\", \"class\": \"blocked-unverified\"},\n"
    "    {\"name\": \"repeat_last_n\", \"class\": \"blocked-unverified\"},\n"
    "    {\"name\": \"seed\", \"class\": \"blocked-unverified\"},\n"
    "    {\"name\": \"stop\", \"class\": \"blocked-unverified\"}\n"
    "  ],\n"
    "  \"validation\": {\n"
    "    \"observed_date\": \"2026-09-04\",\n"
    "    \"sources\": [\"ember-coreui-extended-manual-validation\", "
    "\"game-ember-26b-downstream-confirmation\"],\n"
    "    \"notes\": \"The observed throughput gain belongs to the complete minimal profile. "
    "num_ctx is not recorded as the sole cause.\"\n"
    "  }\n"
    "}\n";

static const char *const turin = "amd-epyc-turin-cpu";

static const struct qr_policy_param *param(const struct qr_policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_params; i++)
        if (strcmp(p->params[i].name, name) == 0)
            return &p->params[i];
    return NULL;
}

static void test_builtin_gemma4(void **state)
{
    (void) state;
    struct qr_diag d = {{0}};
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_load_builtin(&s, &d), QR_OK);
    assert_int_equal(qr_policy_set_count(s), 1);
    const struct qr_policy *p = qr_policy_set_find(s, "gemma4-ollama-turin-minimal");
    assert_non_null(p);
    assert_string_equal(p->file, "policies/gemma4-ollama.json");
    assert_string_equal(p->model_family, "gemma4");
    assert_string_equal(p->backend_kind, "ollama-adapter");
    assert_string_equal(p->hardware_class, turin);
    assert_string_equal(p->renderer, "gemma4");
    assert_string_equal(p->parser, "gemma4");
    assert_int_equal(p->n_variants, 4);
    assert_int_equal(p->n_unclassified, 2);
    assert_string_equal(p->unclassified_variants[0], "12b");
    assert_string_equal(p->unclassified_variants[1], "31b");
    assert_true(p->context.backend_managed);
    assert_true(p->context.override_supported);
    assert_false(p->context.override_verified);
    assert_int_equal(p->unlisted, QR_PARAM_UNVERIFIED);
    assert_false(p->fill_known_good);
    const struct qr_policy_param *t = param(p, "temperature");
    assert_int_equal(t->cls, QR_PARAM_KNOWN_GOOD);
    assert_true(yyjson_get_num(t->value) == 1.0);
    assert_int_equal(yyjson_get_sint(param(p, "top_k")->value), 64);
    assert_true(yyjson_get_num(param(p, "top_p")->value) == 0.95);
    const char *blocked[] = {"num_ctx",       "num_predict", "num_thread", "repeat_penalty",
                             "repeat_last_n", "seed",        "stop"};
    for (size_t i = 0; i < 7; i++) {
        assert_non_null(param(p, blocked[i]));
        assert_int_equal(param(p, blocked[i])->cls, QR_PARAM_UNVERIFIED);
    }
    assert_int_equal(p->n_params, 10);
    assert_non_null(strstr(p->notes, "belongs to the complete minimal profile"));
    assert_non_null(strstr(p->notes, "not recorded as the sole cause"));
    qr_policy_set_free(s);
}

static void test_legacy_file_loads(void **state)
{
    (void) state;
    struct qr_diag d = {{0}};
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_new(&s), QR_OK);
    assert_int_equal(
        qr_policy_set_add(s, "gemma4-ollama-turin.json", legacy_policy, strlen(legacy_policy), &d),
        QR_OK);
    const struct qr_policy *p = qr_policy_set_at(s, 0);
    assert_int_equal(param(p, "seed")->cls, QR_PARAM_UNVERIFIED);
    assert_true(param(p, "seed")->legacy_blocked);
    assert_false(param(p, "top_k")->legacy_blocked);
    /* the builtin one has the same id: a second load is a duplicate */
    struct qr_policy_set *b;
    assert_int_equal(qr_policy_set_load_builtin(&b, &d), QR_OK);
    assert_int_equal(qr_policy_set_add(b, "again.json", legacy_policy, strlen(legacy_policy), &d),
                     QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "duplicate policy id 'gemma4-ollama-turin-minimal'"));
    assert_int_equal(qr_policy_set_count(b), 1);
    qr_policy_set_free(b);
    qr_policy_set_free(s);
}

static size_t match(const struct qr_policy_set *s, const char *fam, const char *var,
                    const char *kind, const char *hw, const char *ver)
{
    const char *vers[1] = {ver};
    struct qr_policy_target t = {fam, var, kind, vers, ver ? 1 : 0, hw};
    const struct qr_policy *out[4];
    return qr_policy_match(s, &t, out, 4);
}

static void test_match_hardware_class_enforced(void **state)
{
    (void) state;
    struct qr_diag d;
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_load_builtin(&s, &d), QR_OK);
    /* the 0.3 test, with the host's class now part of the match */
    assert_int_equal(match(s, "gemma4", "profile_dependent", "ollama-adapter", turin, NULL), 1);
    assert_int_equal(match(s, "gemma4", "E4B", "ollama-adapter", turin, "0.12.3"), 1);
    assert_int_equal(match(s, "Gemma4", "26b-a4b", "ollama-adapter", turin, NULL), 1);
    /* the weak spot: other hardware, or unknown hardware, gets no Turin policy */
    assert_int_equal(match(s, "gemma4", "e4b", "ollama-adapter", "linux-cpu", NULL), 0);
    assert_int_equal(match(s, "gemma4", "e4b", "ollama-adapter", NULL, NULL), 0);
    /* unclassified and unknown variants, other family, other backend */
    assert_int_equal(match(s, "gemma4", "12b", "ollama-adapter", turin, NULL), 0);
    assert_int_equal(match(s, "gemma4", "31b", "ollama-adapter", turin, NULL), 0);
    assert_int_equal(match(s, "gemma4", NULL, "ollama-adapter", turin, NULL), 0);
    assert_int_equal(match(s, "qwen", "30b-a3b", "ollama-adapter", turin, NULL), 0);
    assert_int_equal(match(s, "gemma4", "e4b", "llama.cpp", turin, NULL), 0);
    assert_int_equal(match(s, NULL, "e4b", "ollama-adapter", turin, NULL), 0);
    qr_policy_set_free(s);
}

#define POLICY_HEAD                                                                                \
    "{\"schema_version\":\"quantum.runtime/model-policy/v1alpha1\",\"model_family\":\"fam\","      \
    "\"backend_kind\":\"llama.cpp\",\"validation\":{\"observed_date\":\"2026-11-30\","             \
    "\"sources\":[\"test\"]},"

static enum qr_err add(struct qr_policy_set *s, const char *json, struct qr_diag *d)
{
    memset(d, 0, sizeof(*d));
    return qr_policy_set_add(s, "t.json", json, strlen(json), d);
}

static void test_match_wildcards_and_versions(void **state)
{
    (void) state;
    struct qr_diag d;
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_new(&s), QR_OK);
    assert_int_equal(add(s,
                         POLICY_HEAD "\"id\":\"any-host\",\"variants\":[\"*\"],"
                                     "\"hardware_class\":\"*\",\"context\":{\"backend_managed\":"
                                     "false,\"override_supported\":false,\"override_verified\":"
                                     "false},\"parameters\":[]}",
                         &d),
                     QR_OK);
    assert_int_equal(add(s,
                         POLICY_HEAD "\"id\":\"ranged\",\"variants\":[\"small\"],"
                                     "\"engine_versions\":[\">=b9000 <b9211\",\"b11669\"],"
                                     "\"hardware_class\":\"any\",\"context\":{\"backend_managed\":"
                                     "false,\"override_supported\":false,\"override_verified\":"
                                     "false},\"parameters\":[]}",
                         &d),
                     QR_OK);
    const char *vers[2] = {"0.7.0", "b11669"};
    struct qr_policy_target t = {"fam", "small", "llama.cpp", vers, 2, NULL};
    const struct qr_policy *out[4];
    assert_int_equal(qr_policy_match(s, &t, out, 4), 2);
    assert_string_equal(out[0]->id, "any-host"); /* id order */
    assert_string_equal(out[1]->id, "ranged");
    t.engine_versions = (const char *[]){"b9100"};
    t.n_engine_versions = 1;
    assert_int_equal(qr_policy_match(s, &t, out, 4), 2);
    t.engine_versions = (const char *[]){"b9211"};
    assert_int_equal(qr_policy_match(s, &t, out, 4), 1);
    t.engine_versions = (const char *[]){"0.7.0"}; /* incomparable with b-builds */
    assert_int_equal(qr_policy_match(s, &t, out, 4), 1);
    t.n_engine_versions = 0; /* unknown version: only the unconstrained policy */
    assert_int_equal(qr_policy_match(s, &t, out, 4), 1);
    assert_string_equal(out[0]->id, "any-host");
    t.variant = NULL; /* unknown variant still matches "*" */
    assert_int_equal(qr_policy_match(s, &t, out, 1), 1);
    qr_policy_set_free(s);
}

struct bad {
    const char *json;
    const char *msg;
};

#define CTX_OK                                                                                     \
    "\"context\":{\"backend_managed\":true,\"override_supported\":true,\"override_verified\":"     \
    "false}"
#define HEAD_OK POLICY_HEAD "\"id\":\"p\",\"variants\":[\"v\"],\"hardware_class\":\"*\","

static void test_validation_errors_name_path(void **state)
{
    (void) state;
    static const struct bad cases[] = {
        {HEAD_OK CTX_OK ",\"parameters\":[],\"extra\":1}",
         "cannot load 't.json': unknown field 'extra'"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"top_k\",\"class\":\"known-good\"},"
                        "{\"name\":\"seed\",\"class\":\"fast\"}]}",
         "cannot load 't.json': parameters[1].class: unknown class 'fast'"},
        {HEAD_OK "\"context\":{\"backend_managed\":true,\"override_supported\":false,"
                 "\"override_verified\":true},\"parameters\":[]}",
         "context: override_verified requires override_supported"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"seed\",\"class\":\"optional\"},"
                        "{\"name\":\"seed\",\"class\":\"unverified\"}]}",
         "parameters[1]: parameter 'seed' named twice"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"num_predict\",\"class\":\"optional\"},"
                        "{\"name\":\"max_tokens\",\"class\":\"unverified\"}]}",
         "parameters[1]: parameter 'max_tokens' named twice"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"seed\",\"class\":\"required\"}]}",
         "parameters[0]: a required parameter needs a value"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"temperature\",\"class\":\"known-good\","
                        "\"value\":\"hot\"}]}",
         "parameters[0].value: 'temperature' takes a number"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"top_k\",\"class\":\"known-good\","
                        "\"value\":6.5}]}",
         "parameters[0].value: 'top_k' takes an integer"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"seed\",\"class\":\"required\","
                        "\"value\":18446744073709551615}]}",
         "parameters[0].value: 'seed' takes an integer"},
        {HEAD_OK CTX_OK ",\"parameters\":[{\"name\":\"x\",\"class\":\"optional\",\"bogus\":1}]}",
         "parameters[0]: unknown field 'bogus'"},
        {HEAD_OK CTX_OK ",\"parameters\":[]} {}", "invalid JSON"},
        {HEAD_OK CTX_OK ",\"parameters\":[],\"parameters\":[]}", "duplicate field 'parameters'"},
        {HEAD_OK CTX_OK "}", "parameters: required"},
        {POLICY_HEAD "\"id\":\"p\",\"variants\":[],\"hardware_class\":\"*\"," CTX_OK
                     ",\"parameters\":[]}",
         "variants: must not be empty"},
        {POLICY_HEAD "\"id\":\"p\",\"variants\":[\"a\",\"a\"],\"hardware_class\":\"*\"," CTX_OK
                     ",\"parameters\":[]}",
         "variants[1]: duplicate 'a'"},
        {POLICY_HEAD "\"id\":\"p\",\"variants\":[\"a\"],\"unclassified_variants\":[\"A\"],"
                     "\"hardware_class\":\"*\"," CTX_OK ",\"parameters\":[]}",
         "unclassified_variants[0]: 'A' is also a covered variant"},
        {POLICY_HEAD "\"id\":\"p\",\"variants\":[\"a\"],\"engine_versions\":[\">=\"],"
                     "\"hardware_class\":\"*\"," CTX_OK ",\"parameters\":[]}",
         "engine_versions[0]: '>=' is not a version constraint"},
        {POLICY_HEAD "\"id\":\"p q\",\"variants\":[\"a\"],\"hardware_class\":\"*\"," CTX_OK
                     ",\"parameters\":[]}",
         "id: 'p q' may hold only"},
        {POLICY_HEAD "\"id\":\"p\",\"variants\":[\"a\"],\"hardware_class\":\" \"," CTX_OK
                     ",\"parameters\":[]}",
         "hardware_class: must not be blank"},
        {"{\"schema_version\":\"quantum.runtime/model-policy/v9\"}",
         "schema_version: 'quantum.runtime/model-policy/v9' is not"},
        {"[]", "cannot load 't.json': expected an object"},
        {"{\"schema_version\":\"quantum.runtime/model-policy/v1alpha1\",\"id\":\"p\","
         "\"model_family\":\"f\",\"backend_kind\":\"k\",\"variants\":[\"a\"],"
         "\"hardware_class\":\"*\"," CTX_OK ",\"parameters\":[],\"validation\":{"
         "\"observed_date\":\"2026-02-30\",\"sources\":[\"s\"]}}",
         "validation.observed_date: '2026-02-30' is not a YYYY-MM-DD date"},
        {"{\"schema_version\":\"quantum.runtime/model-policy/v1alpha1\",\"id\":\"p\","
         "\"model_family\":\"f\",\"backend_kind\":\"k\",\"variants\":[\"a\"],"
         "\"hardware_class\":\"*\"," CTX_OK ",\"parameters\":[],\"validation\":{"
         "\"observed_date\":\"2026-02-03\",\"sources\":[]}}",
         "validation.sources: must not be empty"},
        {HEAD_OK CTX_OK ",\"parameters\":[],\"unlisted_parameters\":\"known-good\"}",
         "unlisted_parameters: 'known-good' must be unverified or optional"},
        {HEAD_OK "\"context\":{\"backend_managed\":true,\"override_supported\":true,"
                 "\"override_verified\":true,\"native_max\":100,\"requested_limit\":200},"
                 "\"parameters\":[]}",
         "context: requested_limit 200 exceeds native_max 100"},
        {HEAD_OK "\"context\":{\"backend_managed\":true,\"override_supported\":true,"
                 "\"override_verified\":true,\"native_max\":-1},\"parameters\":[]}",
         "context.native_max: must not be negative"},
    };
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_new(&s), QR_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct qr_diag d;
        if (add(s, cases[i].json, &d) != QR_ERR_INVALID || !strstr(d.msg, cases[i].msg))
            fail_msg("case %zu: got '%s', want '%s'", i, d.msg, cases[i].msg);
    }
    assert_int_equal(qr_policy_set_count(s), 0);
    struct qr_diag d;
    assert_int_equal(add(s, HEAD_OK CTX_OK ",\"parameters\":[]}", &d), QR_OK);
    assert_int_equal(qr_policy_set_count(s), 1);
    qr_policy_set_free(s);
}

static void test_render_shape(void **state)
{
    (void) state;
    struct qr_diag d;
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_load_builtin(&s, &d), QR_OK);
    yyjson_mut_doc *doc = qr_policy_set_render(s);
    assert_non_null(doc);
    size_t len;
    char *json = yyjson_mut_write(doc, 0, &len);
    yyjson_doc *back = yyjson_read(json, len, 0);
    yyjson_val *root = yyjson_doc_get_root(back);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "api_version")), "v1alpha1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "schema_version")), QR_POLICY_SCHEMA);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), 1);
    yyjson_val *p = yyjson_arr_get(yyjson_obj_get(root, "policies"), 0);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(p, "id")), "gemma4-ollama-turin-minimal");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(p, "hardware_class")), turin);
    yyjson_val *params = yyjson_obj_get(p, "parameters");
    assert_int_equal(yyjson_arr_size(params), 10);
    yyjson_val *k = yyjson_arr_get(params, 1);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(k, "name")), "top_k");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(k, "class")), "known-good");
    assert_int_equal(yyjson_get_sint(yyjson_obj_get(k, "value")), 64);
    k = yyjson_arr_get(params, 3);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(k, "class")), "unverified");
    assert_null(yyjson_obj_get(k, "value"));
    yyjson_val *ctx = yyjson_obj_get(p, "context");
    assert_false(yyjson_get_bool(yyjson_obj_get(ctx, "override_verified")));
    assert_null(yyjson_obj_get(ctx, "native_max"));
    /* the rendered policy loads again as a policy file */
    yyjson_mut_doc *one = yyjson_mut_doc_new(NULL);
    yyjson_mut_doc_set_root(one, qr_policy_render(one, qr_policy_set_at(s, 0)));
    char *again = yyjson_mut_write(one, 0, &len);
    struct qr_policy_set *s2;
    assert_int_equal(qr_policy_set_new(&s2), QR_OK);
    assert_int_equal(qr_policy_set_add(s2, "r.json", again, len, &d), QR_OK);
    free(again);
    yyjson_mut_doc_free(one);
    qr_policy_set_free(s2);
    yyjson_doc_free(back);
    free(json);
    yyjson_mut_doc_free(doc);
    qr_policy_set_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_gemma4),
        cmocka_unit_test(test_legacy_file_loads),
        cmocka_unit_test(test_match_hardware_class_enforced),
        cmocka_unit_test(test_match_wildcards_and_versions),
        cmocka_unit_test(test_validation_errors_name_path),
        cmocka_unit_test(test_render_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
