/* The context-override regression guard: a slower override is refused, a faster or equal one is
 * verified, a loss of exactly the threshold passes and a hair more does not, no evidence or thin
 * evidence fails closed, a custom threshold applies; and the evidence lookup in the store matches
 * only the exact model, backend, engine version and host, newest run first. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ab.h"
#include "bench/guard.h"
#include "capability/capability.h"
#include "router/router.h"
#include "store/store.h"

static struct qr_guard_evidence ev(double native, double override, size_t n)
{
    struct qr_guard_evidence e = {.found = true,
                                  .native_median = native,
                                  .override_median = override,
                                  .native_n = n,
                                  .override_n = n};
    return e;
}

static void test_slower_override_refused(void **st)
{
    (void) st;
    struct qr_guard_evidence e = ev(25.4, 19.5, 5); /* the Game Ember regression's shape */
    struct qr_guard_decision d;
    qr_guard_decide(&e, -1, &d);
    assert_int_equal(d.verdict, QR_GUARD_REFUSED);
    assert_false(d.override_verified);
    assert_true(d.threshold_pct == QR_GUARD_DEFAULT_THRESHOLD_PCT);
    assert_true(d.delta_pct < -20.0 && d.delta_pct > -25.0);
    assert_non_null(strstr(d.reason, "native path is kept"));
}

static void test_faster_override_allowed(void **st)
{
    (void) st;
    struct qr_guard_evidence e = ev(20.0, 24.7, 3);
    struct qr_guard_decision d;
    qr_guard_decide(&e, QR_GUARD_DEFAULT_THRESHOLD_PCT, &d);
    assert_int_equal(d.verdict, QR_GUARD_VERIFIED);
    assert_true(d.override_verified);
    assert_true(fabs(d.delta_pct - 23.5) < 1e-9);
    e = ev(20.0, 20.0, 2); /* equal */
    qr_guard_decide(&e, 5.0, &d);
    assert_true(d.override_verified);
    e = ev(20.0, 19.5, 2); /* -2.5%: within 5% */
    qr_guard_decide(&e, 5.0, &d);
    assert_true(d.override_verified);
}

static void test_no_evidence_fails_closed(void **st)
{
    (void) st;
    struct qr_guard_decision d;
    qr_guard_decide(NULL, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_NO_EVIDENCE);
    assert_false(d.override_verified);
    assert_true(isnan(d.delta_pct));
    struct qr_guard_evidence none = {0};
    qr_guard_decide(&none, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_NO_EVIDENCE);
    assert_false(d.override_verified);
}

static void test_thin_evidence_fails_closed(void **st)
{
    (void) st;
    struct qr_guard_decision d;
    struct qr_guard_evidence e = ev(20.0, 30.0, 1); /* one sample per arm */
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_INSUFFICIENT);
    assert_false(d.override_verified);
    e = ev(0.0, 30.0, 3); /* no usable native median */
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_INSUFFICIENT);
    e = ev(NAN, 30.0, 3);
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_INSUFFICIENT);
    e = ev(20.0, NAN, 3);
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_INSUFFICIENT);
    e = ev(20.0, 30.0, 3);
    e.override_n = 1;
    qr_guard_decide(&e, 5.0, &d);
    assert_false(d.override_verified);
}

static void test_threshold_edge(void **st)
{
    (void) st;
    struct qr_guard_decision d;
    struct qr_guard_evidence e = ev(100.0, 95.0, 2); /* exactly -5% */
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_VERIFIED);
    e = ev(100.0, 94.999, 2); /* a hair more */
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_REFUSED);
    e = ev(25.4, 24.13, 2); /* exactly -5% of a real-looking rate */
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_VERIFIED);
    /* configurable: 0% refuses any loss, 10% allows -9% */
    e = ev(100.0, 99.9, 2);
    qr_guard_decide(&e, 0.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_REFUSED);
    e = ev(100.0, 91.0, 2);
    qr_guard_decide(&e, 10.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_VERIFIED);
    assert_true(d.threshold_pct == 10.0);
    qr_guard_decide(&e, NAN, &d); /* bad threshold: the default */
    assert_int_equal(d.verdict, QR_GUARD_REFUSED);
}

static void save(struct qr_store *s, const char *model, const char *fp, const char *ver,
                 double native, double override, int64_t time_ms)
{
    struct qr_bench_result *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(qr_bench_arms_parse("native,override", 256, r->arms, NULL), QR_OK);
    snprintf(r->model_key, sizeof r->model_key, "%s", model);
    snprintf(r->id.fingerprint, sizeof r->id.fingerprint, "%s", fp);
    snprintf(r->id.engine_version, sizeof r->id.engine_version, "%s", ver);
    r->reps = 3;
    r->finished_ms = time_ms;
    for (size_t i = 0; i < 3; i++) {
        r->samples[0][i] = (struct qr_bench_sample){.ok = true, .decode_tps = native};
        r->samples[1][i] = (struct qr_bench_sample){.ok = true, .decode_tps = override};
    }
    assert_int_equal(qr_bench_ab_save(s, r, NULL, NULL), QR_OK);
    free(r);
}

static void test_evidence_lookup(void **st)
{
    (void) st;
    char dir[] = "/tmp/qr-test-guard-XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/evidence.db", dir);
    struct qr_store *s = NULL;
    assert_int_equal(qr_store_open(path, NULL, &s, NULL, NULL), QR_OK);
    struct qr_guard_evidence e;
    struct qr_guard_decision d;
    /* empty store: nothing, fail closed */
    assert_int_equal(qr_guard_evidence_find(s, "m", "llamacpp", "0.7.0", "fp1", &e, NULL), QR_OK);
    assert_false(e.found);
    save(s, "m", "fp1", "0.7.0", 20.0, 25.0, 1000);     /* faster */
    save(s, "m", "fp1", "0.7.0", 25.0, 19.0, 2000);     /* newer: slower */
    save(s, "m", "fp2", "0.7.0", 25.0, 30.0, 3000);     /* another host */
    save(s, "other", "fp1", "0.7.0", 25.0, 30.0, 4000); /* another model */
    assert_int_equal(qr_guard_evidence_find(s, "m", "llamacpp", "0.7.0", "fp1", &e, NULL), QR_OK);
    assert_true(e.found);
    assert_int_equal(e.time_ms, 2000);
    assert_true(e.native_median == 25.0 && e.override_median == 19.0);
    assert_int_equal(e.native_n, 3);
    assert_string_equal(e.override_label, "override:ctx=256");
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_REFUSED);
    /* exact key: another engine version, backend or host has no evidence */
    assert_int_equal(qr_guard_evidence_find(s, "m", "llamacpp", "0.8.0", "fp1", &e, NULL), QR_OK);
    assert_false(e.found);
    assert_int_equal(qr_guard_evidence_find(s, "m", "ollama", "0.7.0", "fp1", &e, NULL), QR_OK);
    assert_false(e.found);
    assert_int_equal(qr_guard_evidence_find(s, "m", "llamacpp", "0.7.0", NULL, &e, NULL), QR_OK);
    assert_false(e.found);
    assert_int_equal(qr_guard_evidence_find(s, "m", "llamacpp", "0.7.0", "fp2", &e, NULL), QR_OK);
    assert_true(e.found && e.override_median == 30.0);
    qr_store_close(s);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The router's records: verified -> a conformance record on context.override, refused -> a
 * refutation, no or thin evidence -> neither (the router then never forwards). */
static void test_route_records(void **st)
{
    (void) st;
    struct qr_route_verified ok;
    struct qr_route_refuted bad;
    struct qr_guard_decision d;
    struct qr_guard_evidence e = ev(20.0, 21.0, 3);
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(
        qr_guard_route_record(&d, "llama", "m", "0.7.0", "linux-cpu", "run 1", &ok, &bad), 1);
    assert_string_equal(ok.backend_id, "llama");
    assert_string_equal(ok.hardware_class, "linux-cpu");
    assert_null(ok.artifact_uri);
    assert_true(qr_cap_set_has(ok.keys, QR_CAP_CONTEXT_OVERRIDE));
    e = ev(20.0, 10.0, 3);
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(
        qr_guard_route_record(&d, "llama", "m", "0.7.0", "linux-cpu", "run 2", &ok, &bad), -1);
    assert_true(qr_cap_set_has(bad.keys, QR_CAP_CONTEXT_OVERRIDE));
    assert_string_equal(bad.detail, "run 2");
    qr_guard_decide(NULL, 5.0, &d);
    assert_int_equal(qr_guard_route_record(&d, "llama", "m", "0.7.0", "linux-cpu", "x", &ok, &bad),
                     0);
    e = ev(20.0, 21.0, 3);
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(qr_guard_route_record(&d, "llama", "m", "0.7.0", NULL, "x", &ok, &bad), 0);
}

/* A faster override measured noisily is not verified; a slower one is refused however noisy. */
static void test_noise(void **st)
{
    (void) st;
    struct qr_guard_decision d;
    struct qr_guard_evidence e = ev(200.0, 340.0, 5);
    e.native_stddev = 199.0; /* the loaded 2-core VM's spread */
    e.override_stddev = 378.0;
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_INSUFFICIENT);
    assert_false(d.override_verified);
    assert_non_null(strstr(d.reason, "too noisy"));
    e.native_stddev = 30.0; /* 15.0% exactly: still verified */
    e.override_stddev = 51.0;
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_VERIFIED);
    e = ev(500.0, 60.0, 5);
    e.native_stddev = 1200.0;
    e.override_stddev = 200.0;
    qr_guard_decide(&e, 5.0, &d);
    assert_int_equal(d.verdict, QR_GUARD_REFUSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slower_override_refused),
        cmocka_unit_test(test_faster_override_allowed),
        cmocka_unit_test(test_no_evidence_fails_closed),
        cmocka_unit_test(test_thin_evidence_fails_closed),
        cmocka_unit_test(test_threshold_edge),
        cmocka_unit_test(test_evidence_lookup),
        cmocka_unit_test(test_route_records),
        cmocka_unit_test(test_noise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
