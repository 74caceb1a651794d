/* The A/B benchmark's pure parts: the spread statistics (median of odd and even counts, sample
 * stddev, NAN samples skipped, empty input), the arm syntax and its errors, the engine arguments
 * of each arm, and the stored rows' round trip through the evidence store. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "core/arena.h"
#include "store/store.h"

static void test_stats_odd_even(void **st)
{
    (void) st;
    struct qr_bench_stats s;
    const double odd[] = {3.0, 1.0, 2.0};
    qr_bench_stats_compute(odd, 3, &s);
    assert_int_equal(s.n, 3);
    assert_true(s.median == 2.0 && s.min == 1.0 && s.max == 3.0 && s.mean == 2.0);
    assert_true(fabs(s.stddev - 1.0) < 1e-12); /* sample stddev of 1,2,3 */
    const double even[] = {10.0, 4.0, 8.0, 2.0};
    qr_bench_stats_compute(even, 4, &s);
    assert_true(s.median == 6.0 && s.min == 2.0 && s.max == 10.0 && s.mean == 6.0);
    assert_true(fabs(s.stddev - sqrt(40.0 / 3.0)) < 1e-12);
}

static void test_stats_nan_and_empty(void **st)
{
    (void) st;
    struct qr_bench_stats s;
    const double v[] = {NAN, 5.0, NAN};
    qr_bench_stats_compute(v, 3, &s);
    assert_int_equal(s.n, 1);
    assert_true(s.median == 5.0 && s.stddev == 0.0);
    qr_bench_stats_compute(v, 0, &s);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.median) && isnan(s.stddev));
    const double all_nan[] = {NAN, NAN};
    qr_bench_stats_compute(all_nan, 2, &s);
    assert_int_equal(s.n, 0);
}

static void test_arms_parse(void **st)
{
    (void) st;
    struct qr_bench_arm a[2];
    struct qr_diag d = {{0}};
    assert_int_equal(qr_bench_arms_parse("native,override", 4096, a, &d), QR_OK);
    assert_string_equal(a[0].label, "native");
    assert_false(a[0].override);
    assert_int_equal(a[0].n_knobs, 0);
    assert_string_equal(a[1].label, "override:ctx=4096");
    assert_true(a[1].override);
    /* extra knobs after the context; a ctx knob replaces --ctx */
    assert_int_equal(qr_bench_arms_parse("native,override:ubatch=256,flash-attn=off", 2048, a, &d),
                     QR_OK);
    assert_string_equal(a[1].label, "override:ctx=2048,ubatch=256,flash-attn=off");
    assert_int_equal(qr_bench_arms_parse("native,override:ctx=1024", 2048, a, &d), QR_OK);
    assert_string_equal(a[1].label, "override:ctx=1024");
    assert_int_equal(a[1].n_knobs, 1);
}

static void test_arms_parse_errors(void **st)
{
    (void) st;
    struct qr_bench_arm a[2];
    struct qr_diag d = {{0}};
    static const char *const bad[] = {
        "override,native",
        "native",
        "native,overrides",
        "native,override:",
        "native,override:ctx",
        "native,override:ctx=0",
        "native,override:ctx=-1",
        "native,override:ctx=12a",
        "native,override:mmap=1",
        "native,override:ubatch=1,ubatch=2",
        "native,override:cache-type-k=q8 0",
        "native,override:batch=1,ubatch=2,threads=3,ctx=4,flash-attn=on",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d.msg[0] = '\0';
        assert_int_equal(qr_bench_arms_parse(bad[i], 4096, a, &d), QR_ERR_INVALID);
        assert_true(d.msg[0] != '\0');
    }
    assert_int_equal(qr_bench_arms_parse("native,override", 0, a, &d), QR_ERR_INVALID);
    assert_int_equal(qr_bench_arms_parse(NULL, 4096, a, &d), QR_ERR_INVALID);
}

static void test_arm_args(void **st)
{
    (void) st;
    struct qr_bench_arm a[2];
    assert_int_equal(
        qr_bench_arms_parse("native,override:threads=2,cache-type-k=q8_0", 512, a, NULL), QR_OK);
    const char *v[32];
    size_t n = qr_bench_arm_args(&a[0], v, 32);
    assert_int_equal(n, 2);
    assert_string_equal(v[0], "-np");
    assert_string_equal(v[1], "1");
    assert_null(v[2]);
    n = qr_bench_arm_args(&a[1], v, 32);
    const char *want[] = {"-np", "1", "-c", "512", "-t", "2", "-tb", "2", "-ctk", "q8_0"};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i], want[i]);
    assert_null(v[n]);
    assert_string_equal(qr_bench_knob_flag("ctx"), "-c");
    assert_null(qr_bench_knob_flag("mlock"));
}

/* A made-up result stored and read back: one row per metric, keyed by model and arms. */
static void test_save_rows(void **st)
{
    (void) st;
    char dir[] = "/tmp/qr-test-bench-ab-XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/evidence.db", dir);
    struct qr_store *s = NULL;
    assert_int_equal(qr_store_open(path, NULL, &s, NULL, NULL), QR_OK);
    struct qr_bench_result *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(qr_bench_arms_parse("native,override", 256, r->arms, NULL), QR_OK);
    snprintf(r->model_key, sizeof r->model_key, "m1");
    snprintf(r->id.fingerprint, sizeof r->id.fingerprint, "00112233aabbccdd");
    snprintf(r->id.engine_version, sizeof r->id.engine_version, "0.7.0");
    r->reps = 2;
    for (size_t a = 0; a < 2; a++) {
        for (size_t i = 0; i < 2; i++) {
            struct qr_bench_sample *x = &r->samples[a][i];
            x->ok = true;
            x->decode_tps = 100.0 + (double) (a * 10 + i);
            x->prefill_tps = 1000.0;
            x->ttft_ms = 5.0;
            x->rss_bytes = x->hwm_bytes = 1u << 20;
            x->kv_bytes = a ? 4096 : 8192;
        }
    }
    int64_t id = 0;
    assert_int_equal(qr_bench_ab_save(s, r, &id, NULL), QR_OK);
    assert_true(id > 0);
    struct qr_arena ar;
    qr_arena_init(&ar, 0);
    struct qr_store_filter f = {.name = QR_BENCH_AB_NAME, .model = "m1"};
    struct qr_store_bench *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_bench_list(s, &f, &ar, &rows, &n, NULL), QR_OK);
    assert_int_equal(n, QR_BENCH_N_METRICS);
    bool saw_decode = false;
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(rows[i].variant_a, "native");
        assert_string_equal(rows[i].variant_b, "override:ctx=256");
        if (strcmp(rows[i].metric, "decode_tps"))
            continue;
        saw_decode = true;
        yyjson_doc *doc = yyjson_read(rows[i].values_json, strlen(rows[i].values_json), 0);
        yyjson_val *root = yyjson_doc_get_root(doc);
        assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "host_fingerprint")),
                            "00112233aabbccdd");
        yyjson_val *b =
            yyjson_obj_get(yyjson_obj_get(yyjson_obj_get(root, "b"), "stats"), "decode_tps");
        assert_true(fabs(yyjson_get_num(yyjson_obj_get(b, "median")) - 110.5) < 1e-9);
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(b, "n")), 2);
        yyjson_doc_free(doc);
    }
    assert_true(saw_decode);
    qr_arena_cleanup(&ar);
    qr_store_close(s);
    free(r);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_odd_even), cmocka_unit_test(test_stats_nan_and_empty),
        cmocka_unit_test(test_arms_parse),     cmocka_unit_test(test_arms_parse_errors),
        cmocka_unit_test(test_arm_args),       cmocka_unit_test(test_save_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
