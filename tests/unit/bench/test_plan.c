/* The benchmark plan: the predecessor's upstream cases (effective 20, reserve 4, minimum 8, full
 * host: candidates 8, 12, 16 production and 20 comparison, max 16; a core budget of 16 with 12
 * visible CPUs is an error), the defaults, the request decoder's refusals, and the matrix: Gemma
 * 4's five variants by default, any family with its own variants, a family without variants
 * refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include <yyjson.h>

#include "bench/plan.h"

static void test_upstream_cases(void **st)
{
    (void) st;
    struct qr_bench_plan_req q = {
        .reserve_system_cores = 4, .minimum_workers = 8, .include_full_host_comparison = true};
    struct qr_bench_plan p;
    assert_int_equal(qr_bench_plan_workers(&q, 20, &p, NULL), QR_OK);
    assert_int_equal(p.production_max_workers, 16);
    assert_int_equal(p.effective_host_cpus, 20);
    assert_int_equal(p.reserved_system_cores, 4);
    const uint32_t want[] = {8, 12, 16, 20};
    assert_int_equal(p.n_candidates, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(p.candidates[i].workers, want[i]);
        assert_int_equal(p.candidates[i].full_host, i == 3);
    }
    struct qr_bench_plan_req b = {.core_budget = 16};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_bench_plan_workers(&b, 12, &p, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "core_budget"));
}

static void test_defaults_and_limits(void **st)
{
    (void) st;
    struct qr_bench_plan_req q = {0};
    struct qr_bench_plan p;
    /* 2 CPUs: min 4 clamped to 2 -> [2] */
    assert_int_equal(qr_bench_plan_workers(&q, 2, &p, NULL), QR_OK);
    assert_int_equal(p.n_candidates, 1);
    assert_int_equal(p.candidates[0].workers, 2);
    /* 10 CPUs, budget 6: 4 and 6 (max itself) */
    q.core_budget = 6;
    assert_int_equal(qr_bench_plan_workers(&q, 10, &p, NULL), QR_OK);
    assert_int_equal(p.n_candidates, 2);
    assert_int_equal(p.candidates[0].workers, 4);
    assert_int_equal(p.candidates[1].workers, 6);
    /* a reserve that leaves nothing */
    struct qr_bench_plan_req r = {.reserve_system_cores = 2};
    assert_int_equal(qr_bench_plan_workers(&r, 2, &p, NULL), QR_ERR_INVALID);
    struct qr_bench_plan_req n = {.minimum_workers = -1};
    assert_int_equal(qr_bench_plan_workers(&n, 8, &p, NULL), QR_ERR_INVALID);
}

static enum qr_err parse(const char *json, struct qr_bench_plan_req *q, struct qr_diag *d)
{
    yyjson_doc *doc = yyjson_read(json, strlen(json), 0);
    assert_non_null(doc);
    enum qr_err err = qr_bench_plan_req_parse(doc, q, d);
    yyjson_doc_free(doc);
    return err;
}

static void test_request_parse(void **st)
{
    (void) st;
    struct qr_bench_plan_req q;
    struct qr_diag d = {{0}};
    assert_int_equal(parse("{\"model\":\"gemma4:e4b\",\"core_budget\":16,"
                           "\"reserve_system_cores\":4,\"minimum_workers\":8,"
                           "\"include_full_host_comparison\":true,\"ctx\":8192}",
                           &q, &d),
                     QR_OK);
    assert_string_equal(q.model, "gemma4:e4b");
    assert_int_equal(q.core_budget, 16);
    assert_int_equal(q.ctx, 8192);
    assert_true(q.include_full_host_comparison);
    static const char *const bad[] = {
        "{\"x\":1}",
        "{\"core_budget\":-1}",
        "{\"core_budget\":1.5}",
        "{\"core_budget\":1,\"core_budget\":2}",
        "{\"variants\":[]}",
        "{\"variants\":[\"a b\"]}",
        "{\"family\":\"\"}",
        "{\"include_full_host_comparison\":1}",
        "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse(bad[i], &q, &d), QR_ERR_INVALID);
}

static void test_matrix(void **st)
{
    (void) st;
    struct qr_bench_plan_req q = {0};
    struct qr_bench_plan p;
    assert_int_equal(qr_bench_plan_workers(&q, 8, &p, NULL), QR_OK); /* 4, 8 */
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, o);
    assert_int_equal(qr_bench_plan_json(&q, &p, d, o, NULL), QR_OK);
    yyjson_doc *r = yyjson_mut_doc_imut_copy(d, NULL);
    yyjson_val *root = yyjson_doc_get_root(r);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "schema_version")),
                        QR_BENCH_PLAN_SCHEMA);
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(root, "notes")), 3);
    yyjson_val *m = yyjson_obj_get(root, "matrix");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "family")), "gemma4");
    yyjson_val *v = yyjson_obj_get(m, "variants");
    assert_int_equal(yyjson_arr_size(v), 5);
    assert_string_equal(yyjson_get_str(yyjson_arr_get(v, 0)), "e2b");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(v, 3)), "26b-a4b");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(v, 4)), "31b");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(m, "cells")), 5 * 2 * 2);
    yyjson_val *arms = yyjson_obj_get(m, "arms");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(arms, 1)), "override:ctx=4096");
    yyjson_val *run = yyjson_arr_get(yyjson_obj_get(m, "runs"), 1);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(run, "model")), "gemma4-e4b");
    assert_non_null(strstr(yyjson_get_str(yyjson_obj_get(run, "command")), "--ab native,override"));
    yyjson_doc_free(r);
    yyjson_mut_doc_free(d);

    /* another family: its own variants; without them refused */
    struct qr_bench_plan_req f = {
        .family = "qwen3", .n_variants = 2, .variants = {"8b", "30b-a3b"}};
    d = yyjson_mut_doc_new(NULL);
    o = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, o);
    assert_int_equal(qr_bench_plan_json(&f, &p, d, o, NULL), QR_OK);
    r = yyjson_mut_doc_imut_copy(d, NULL);
    m = yyjson_obj_get(yyjson_doc_get_root(r), "matrix");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "family")), "qwen3");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(m, "cells")), 2 * 2 * 2);
    yyjson_doc_free(r);
    yyjson_mut_doc_free(d);
    struct qr_bench_plan_req g = {.family = "llama"};
    struct qr_diag dg = {{0}};
    d = yyjson_mut_doc_new(NULL);
    o = yyjson_mut_obj(d);
    assert_int_equal(qr_bench_plan_json(&g, &p, d, o, &dg), QR_ERR_INVALID);
    assert_non_null(strstr(dg.msg, "variants"));
    yyjson_mut_doc_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upstream_cases),
        cmocka_unit_test(test_defaults_and_limits),
        cmocka_unit_test(test_request_parse),
        cmocka_unit_test(test_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
