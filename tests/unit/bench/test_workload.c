/* Workload files: the shipped Game Ember example loads with its numbers, a text persona and the
 * defaults, and every class of bad input (unknown or duplicate field, both or neither prompt form,
 * counts out of range, wrong types, trailing JSON, a wrong schema) is refused naming the field. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bench/workload.h"

#define SCHEMA "\"schema_version\":\"quantum.runtime/bench-workload/v1alpha1\""

static void test_example_file(void **st)
{
    (void) st;
    struct qr_bench_workload w;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_bench_workload_load(QR_TEST_DOCS "/bench/game-ember.json", &w, &d), QR_OK);
    assert_string_equal(w.name, "game-ember");
    assert_int_equal(w.system_prompt_tokens, 2150);
    assert_null(w.system_prompt);
    assert_true(w.think);
    assert_int_equal(w.answer_tokens, 3100);
    assert_non_null(w.user_prompt);
    qr_bench_workload_cleanup(&w);
}

static void test_text_and_defaults(void **st)
{
    (void) st;
    const char *j = "{" SCHEMA ",\"name\":\"p\",\"system_prompt\":\"You are Ember.\","
                    "\"answer_tokens\":8}";
    struct qr_bench_workload w;
    assert_int_equal(qr_bench_workload_parse(j, strlen(j), "'t'", &w, NULL), QR_OK);
    assert_string_equal(w.system_prompt, "You are Ember.");
    assert_int_equal(w.system_prompt_tokens, 0);
    assert_false(w.think);
    assert_string_equal(w.user_prompt, "Continue the scene.");
    qr_bench_workload_cleanup(&w);
    qr_bench_workload_cleanup(&w); /* twice is fine */
}

static void test_bad_inputs(void **st)
{
    (void) st;
    static const struct {
        const char *json, *needle;
    } cases[] = {
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":8,\"answer_tokens\":8,\"x\":1}",
         "unknown field 'x'"},
        {"{" SCHEMA ",\"name\":\"p\",\"name\":\"q\",\"system_prompt_tokens\":8,"
         "\"answer_tokens\":8}",
         "duplicate field 'name'"},
        {"{" SCHEMA ",\"name\":\"p\",\"answer_tokens\":8}", "exactly one of"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt\":\"a\",\"system_prompt_tokens\":8,"
         "\"answer_tokens\":8}",
         "exactly one of"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":0,\"answer_tokens\":8}",
         "system_prompt_tokens"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":8,\"answer_tokens\":70000}",
         "answer_tokens"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":8,\"answer_tokens\":-1}",
         "answer_tokens"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":8}", "answer_tokens: required"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":8,\"answer_tokens\":8,"
         "\"think\":\"yes\"}",
         "think"},
        {"{" SCHEMA ",\"name\":\"a b\",\"system_prompt_tokens\":8,\"answer_tokens\":8}", "name"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt\":\"\",\"answer_tokens\":8}", "system_prompt"},
        {"{\"schema_version\":\"x\",\"name\":\"p\",\"system_prompt_tokens\":8,"
         "\"answer_tokens\":8}",
         "schema_version"},
        {"{" SCHEMA ",\"name\":\"p\",\"system_prompt_tokens\":8,\"answer_tokens\":8} {}",
         "not valid JSON"},
        {"[]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct qr_bench_workload w;
        struct qr_diag d = {{0}};
        assert_int_equal(
            qr_bench_workload_parse(cases[i].json, strlen(cases[i].json), "'t'", &w, &d),
            QR_ERR_INVALID);
        if (!strstr(d.msg, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, d.msg, cases[i].needle);
        assert_non_null(strstr(d.msg, "'t'"));
        qr_bench_workload_cleanup(&w);
    }
    struct qr_bench_workload w;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_bench_workload_load("/nonexistent/w.json", &w, &d), QR_ERR_NOT_FOUND);
    qr_bench_workload_cleanup(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_file),
        cmocka_unit_test(test_text_and_defaults),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
