/* OpenAI dialect profiles (src/backend/openai/profile.c): the builtin data/dialects files load
 * with the documented values; hostile profile files fail with the JSON path (one file per
 * failure class); version comparison and the vLLM reasoning-field eras; dialect detection from
 * the answers of GET /version, /props and /health; the health rule of each profile. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backend/openai/profile.h"

#define S(x) ((struct qr_slice){(x), sizeof(x) - 1})

static void load(const char *name, struct qr_oa_profile *p)
{
    struct qr_diag d = {{0}};
    enum qr_err err = qr_openai_profile_load(name, p, &d);
    if (err)
        fail_msg("%s: %s", name, d.msg);
}

static void test_builtin_profiles(void **state)
{
    struct qr_oa_profile p;
    load("vllm", &p);
    assert_string_equal(p.name, "vllm");
    assert_string_equal(p.reasoning_field, "reasoning");
    assert_int_equal(p.n_eras, 2);
    assert_string_equal(p.health_path, "/health");
    assert_int_equal(p.healthy, QR_OA_HEALTHY_2XX);
    assert_string_equal(p.version_path, "/version");
    assert_string_equal(p.metrics_path, "/metrics");
    assert_true(p.stream_usage);
    assert_false(p.default_temperature_set);
    assert_int_equal(p.default_max_tokens, 0);
    assert_int_equal(p.ops_unsupported, 0);
    assert_string_equal(p.context_length_field, "max_model_len");
    assert_string_equal(p.guided_decoding, "structured_outputs");
    /* the project exactly as data/upstream-ledger.json spells it (its vLLM blocks) */
    assert_string_equal(p.ledger_project, "vLLM");

    load("mlx-lm", &p);
    assert_string_equal(p.reasoning_field, "reasoning");
    assert_int_equal(p.n_eras, 0);
    assert_string_equal(p.health_path, "/health");
    assert_int_equal(p.healthy, QR_OA_HEALTHY_STATUS_OK);
    assert_string_equal(p.version_path, "");
    assert_string_equal(p.metrics_path, "");
    assert_true(p.default_temperature_set);
    assert_true(p.default_temperature == 0.8);
    assert_int_equal(p.default_max_tokens, 8192);
    assert_int_equal(p.ops_unsupported, (1u << QR_OP_EMBED) | (1u << QR_OP_RERANK));
    assert_string_equal(p.guided_decoding, "none");
    assert_string_equal(p.ledger_project, "MLX-LM");

    load("llama-server", &p);
    assert_string_equal(p.ledger_project, "llama.cpp / ggml");
    assert_string_equal(p.reasoning_field, "reasoning_content");
    assert_string_equal(p.health_path, "/health");
    assert_string_equal(p.metrics_path, "/metrics");
    assert_int_equal(p.ops_unsupported, 0);

    load("generic", &p);
    assert_string_equal(p.reasoning_field, "reasoning_content");
    assert_string_equal(p.health_path, "/v1/models");
    assert_string_equal(p.version_path, "");
    assert_false(p.default_temperature_set);
    assert_string_equal(p.ledger_project, ""); /* any server: the project is unknown */

    struct qr_diag d = {{0}};
    assert_int_equal(qr_openai_profile_load("sglang", &p, &d), QR_ERR_INVALID);
    assert_string_equal(d.msg, "unknown openai dialect 'sglang'");
    assert_int_equal(qr_openai_profile_load("../models/x", &p, &d), QR_ERR_INVALID);
}

#define HEAD "{\"schema\":\"quantum.runtime/openai-dialect/v1alpha1\",\"name\":\"generic\","
#define MIN  "\"reasoning_field\":\"reasoning\",\"health\":{\"path\":\"/h\",\"healthy\":\"2xx\"}"

static void test_minimal_profile(void **state)
{
    static const char ok[] = HEAD MIN "}";
    struct qr_oa_profile p;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_openai_profile_parse("t.json", ok, sizeof(ok) - 1, "generic", &p, &d),
                     QR_OK);
    assert_true(p.stream_usage); /* default */
    assert_string_equal(p.guided_decoding, "none");
    assert_string_equal(p.health_path, "/h");
    assert_string_equal(p.ledger_project, "");
}

/* One hostile file per failure class, with the exact message. */
static void test_hostile_profiles(void **state)
{
    static const struct {
        const char *json, *expect_name, *msg;
    } cases[] = {
        {HEAD MIN ",\"extra\":1}", NULL, "cannot load 't.json': unknown field 'extra'"},
        {HEAD MIN ",\"stream_usage\":true,\"stream_usage\":false}", NULL, "duplicate"},
        {"{\"schema\":\"quantum.runtime/openai-dialect/v2\",\"name\":\"generic\"," MIN "}", NULL,
         "unsupported schema"},
        {HEAD "\"health\":{\"path\":\"/h\",\"healthy\":\"2xx\"}}", NULL,
         "reasoning_field: required"},
        {HEAD "\"reasoning_field\":\"thinking\",\"health\":{\"path\":\"/h\",\"healthy\":\"2xx\"}}",
         NULL, "unknown value 'thinking'"},
        {HEAD MIN "}", "vllm", "name 'generic' does not match the file"},
        {"{\"schema\":\"quantum.runtime/openai-dialect/v1alpha1\",\"name\":\"sglang\"," MIN "}",
         NULL, "unknown dialect name 'sglang'"},
        {HEAD "\"reasoning_field\":\"reasoning\"}", NULL, "health: required"},
        {HEAD "\"reasoning_field\":\"reasoning\",\"health\":{\"path\":\"/h\",\"healthy\":\"ok\","
              "\"x\":1}}",
         NULL, "health: unknown field 'x'"},
        {HEAD "\"reasoning_field\":\"reasoning\",\"health\":{\"path\":\"h\",\"healthy\":\"2xx\"}}",
         NULL, "health.path: expected an absolute path"},
        {HEAD MIN ",\"version_path\":\"/../etc\"}", NULL, "version_path: expected an absolute"},
        {HEAD MIN ",\"metrics_path\":\"/m?x=1\"}", NULL, "metrics_path: expected an absolute"},
        {HEAD MIN ",\"stream_usage\":1}", NULL, "stream_usage: expected true or false"},
        {HEAD MIN ",\"defaults\":{\"temperature\":3}}", NULL,
         "defaults.temperature: expected a number in [0, 2]"},
        {HEAD MIN ",\"defaults\":{\"temperature\":\"0.8\"}}", NULL, "defaults.temperature"},
        {HEAD MIN ",\"defaults\":{\"max_tokens\":0}}", NULL, "defaults.max_tokens"},
        {HEAD MIN ",\"defaults\":{\"top_p\":1}}", NULL, "defaults: unknown field 'top_p'"},
        {HEAD MIN ",\"unsupported_ops\":[\"images\"]}", NULL, "unknown operation 'images'"},
        {HEAD MIN ",\"unsupported_ops\":[\"rerank\",\"rerank\"]}", NULL, "unsupported_ops"},
        {HEAD MIN ",\"reasoning_eras\":[{\"min_version\":\"0.11\",\"reasoning_field\":"
                  "\"reasoning\"},{\"min_version\":\"0.16\",\"reasoning_field\":\"reasoning\"}]}",
         NULL, "reasoning_eras[1]: eras must be newest first"},
        {HEAD MIN ",\"reasoning_eras\":[{\"min_version\":\"v1\",\"reasoning_field\":"
                  "\"reasoning\"}]}",
         NULL, "reasoning_eras[0]: min_version 'v1' is not a dotted number"},
        {HEAD MIN ",\"reasoning_eras\":[{\"min_version\":\"1\"}]}", NULL,
         "reasoning_eras[0].reasoning_field: required"},
        {HEAD MIN ",\"guided_decoding\":\"outlines\"}", NULL, "unknown value 'outlines'"},
        {HEAD MIN ",\"ledger_project\":1}", NULL, "ledger_project"},
        {HEAD MIN ",\"ledger_project\":\"a project name longer than thirty-one bytes\"}", NULL,
         "ledger_project"},
        {HEAD MIN "} trailing", NULL, "cannot load 't.json'"},
        {"// comment\n" HEAD MIN "}", NULL, "cannot load 't.json'"},
        {"[]", NULL, "cannot load 't.json'"},
        {"", NULL, "cannot load 't.json'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct qr_oa_profile p;
        struct qr_diag d = {{0}};
        enum qr_err err = qr_openai_profile_parse("t.json", cases[i].json, strlen(cases[i].json),
                                                  cases[i].expect_name, &p, &d);
        if (err != QR_ERR_INVALID && err != QR_ERR_PARSE)
            fail_msg("case %zu accepted: %s", i, cases[i].json);
        if (!strstr(d.msg, cases[i].msg))
            fail_msg("case %zu: '%s' does not contain '%s'", i, d.msg, cases[i].msg);
        assert_string_equal(p.name, ""); /* nothing half-filled */
    }
}

static void test_version_cmp_and_eras(void **state)
{
    assert_true(qr_openai_version_cmp("0.16.0", "0.16") == 0);
    assert_true(qr_openai_version_cmp("0.16.1", "0.16") > 0);
    assert_true(qr_openai_version_cmp("0.9.2", "0.16") < 0);
    assert_true(qr_openai_version_cmp("0.15.99", "0.16") < 0);
    assert_true(qr_openai_version_cmp("1.0", "0.16") > 0);
    assert_true(qr_openai_version_cmp("0.16.0rc1", "0.16") == 0);
    assert_true(qr_openai_version_cmp("0.11.1+cu126", "0.11.1") == 0);
    assert_true(qr_openai_version_cmp("", "0") == 0);

    struct qr_oa_profile p;
    load("vllm", &p);
    assert_string_equal(qr_openai_profile_reasoning_field(&p, "0.16.0"), "reasoning");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, "0.17.1"), "reasoning");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, "0.15.1"), "reasoning_content");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, "0.11.0"), "reasoning_content");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, "0.8.5"), "reasoning_content");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, NULL), "reasoning");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, ""), "reasoning");
    assert_string_equal(qr_openai_profile_reasoning_field(&p, "dev"), "reasoning");

    /* apply: the era, then an explicit override winning over it */
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    qr_openai_profile_apply(&p, "0.13.0", NULL, &d);
    assert_string_equal(d.reasoning_field, "reasoning_content");
    assert_string_equal(d.dialect_name, "vllm");
    qr_openai_profile_apply(&p, "0.13.0", "reasoning", &d);
    assert_string_equal(d.reasoning_field, "reasoning");
    load("mlx-lm", &p);
    qr_openai_profile_apply(&p, NULL, NULL, &d);
    assert_true(d.default_temperature_set);
    assert_int_equal(d.default_max_tokens, 8192);
    assert_int_equal(d.ops_unsupported, (1u << QR_OP_EMBED) | (1u << QR_OP_RERANK));
}

static void detect(const struct qr_oa_probe_answers *a, const char *dialect, const char *version,
                   const char *why)
{
    struct qr_oa_detection det;
    qr_openai_detect(a, &det);
    assert_string_equal(det.dialect, dialect);
    assert_string_equal(det.version, version);
    if (!strstr(det.why, why))
        fail_msg("why '%s' does not contain '%s'", det.why, why);
}

static void test_detect(void **state)
{
    struct qr_oa_probe_answers a = {.version_status = 200,
                                    .version_body = S("{\"version\":"
                                                      "\"0.16.0\"}")};
    detect(&a, "vllm", "0.16.0", "GET /version answered version '0.16.0'");
    a.version_body = S("{\"version\":\"0.13.0\"}");
    detect(&a, "vllm", "0.13.0", "'0.13.0'");
    /* /version answering without a usable version string is not vLLM */
    static const char *const not_version[] = {"",
                                              "Not Found",
                                              "{\"version\":13}",
                                              "{\"version\":\"\"}",
                                              "{\"build\":\"x\"}",
                                              "{\"version\":\"0.1\\\"x\"}"};
    for (size_t i = 0; i < sizeof(not_version) / sizeof(not_version[0]); i++) {
        struct qr_oa_probe_answers b = {.version_status = 200,
                                        .version_body = {not_version[i], strlen(not_version[i])},
                                        .props_status = 404,
                                        .health_status = 404};
        detect(&b, "generic", "", "no known dialect");
    }
    struct qr_oa_probe_answers ls = {
        .version_status = 404, .version_body = S("{\"version\":\"0.16.0\"}"), .props_status = 200};
    detect(&ls, "llama-server", "", "GET /props answered 200");
    struct qr_oa_probe_answers mlx = {.version_status = 404,
                                      .version_body = S("Not Found"),
                                      .props_status = 404,
                                      .health_status = 200,
                                      .health_body = S("{\"status\": \"ok\"}")};
    detect(&mlx, "mlx-lm", "", "GET /health {\"status\":\"ok\"}");
    mlx.health_body = S(""); /* an empty 200 is not mlx_lm.server's answer */
    detect(&mlx, "generic", "", "GET /health 200: no known dialect");
    mlx.health_body = S("{\"status\":\"loading\"}");
    detect(&mlx, "generic", "", "no known dialect");
    mlx.health_status = 503;
    mlx.health_body = S("{\"status\":\"ok\"}");
    detect(&mlx, "generic", "", "GET /health 503");
    struct qr_oa_probe_answers none = {0};
    detect(&none, "generic", "", "GET /version answered 0");
}

static void test_health_rules(void **state)
{
    struct qr_oa_profile p;
    load("vllm", &p);
    assert_true(qr_openai_profile_healthy(&p, 200, S("")));
    assert_false(qr_openai_profile_healthy(&p, 503, S("")));
    load("mlx-lm", &p);
    assert_true(qr_openai_profile_healthy(&p, 200, S("{\"status\":\"ok\"}")));
    assert_false(qr_openai_profile_healthy(&p, 200, S("")));
    assert_false(qr_openai_profile_healthy(&p, 200, S("{\"status\":\"error\"}")));
    assert_false(qr_openai_profile_healthy(&p, 404, S("{\"status\":\"ok\"}")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_profiles), cmocka_unit_test(test_minimal_profile),
        cmocka_unit_test(test_hostile_profiles), cmocka_unit_test(test_version_cmp_and_eras),
        cmocka_unit_test(test_detect),           cmocka_unit_test(test_health_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
