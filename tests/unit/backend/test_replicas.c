/* Replica sets (backend/replicas.h) on a made-up clock: least-outstanding picks with round-robin
 * ties, tried replicas skipped, ejection after consecutive failures, probes with a doubling
 * backoff, re-admission, and when a retry is allowed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "backend/replicas.h"

static const char *const URLS[] = {"http://a:8000", "http://b:8000", "http://c:8000"};

static void init3(struct qr_replica_set *s)
{
    struct qr_replica_opts o = {
        .fail_threshold = 2, .backoff_initial_ms = 100, .backoff_max_ms = 350};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_replica_set_init(s, URLS, 3, &o, &d), QR_OK);
}

static void test_init_validates(void **state)
{
    (void) state;
    static struct qr_replica_set s;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_replica_set_init(&s, URLS, 0, NULL, &d), QR_ERR_INVALID);
    const char *dup[] = {"http://a:8000", "http://a:8000"};
    assert_int_equal(qr_replica_set_init(&s, dup, 2, NULL, &d), QR_ERR_INVALID);
    assert_string_equal(d.msg, "replica 1: 'http://a:8000' is listed twice");
    const char *empty[] = {"http://a:8000", ""};
    assert_int_equal(qr_replica_set_init(&s, empty, 2, NULL, &d), QR_ERR_INVALID);
    assert_int_equal(qr_replica_set_init(&s, URLS, 1, NULL, &d), QR_OK);
    assert_int_equal(s.o.fail_threshold, 3); /* defaults */
    assert_int_equal(s.o.backoff_initial_ms, 1000);
    assert_int_equal(s.o.backoff_max_ms, 30000);
    assert_string_equal(qr_replica_state_str(s.r[0].state), "admitted");
}

static void test_least_outstanding_round_robin(void **state)
{
    (void) state;
    static struct qr_replica_set s;
    init3(&s);
    /* idle and equal: the picks rotate */
    int a = qr_replica_pick(&s, NULL), b = qr_replica_pick(&s, NULL), c = qr_replica_pick(&s, NULL);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(c, 2);
    assert_int_equal(qr_replica_pick(&s, NULL), 0);
    /* the busiest is avoided: 0 has two, 1 has one, 2 none */
    qr_replica_begin(&s, 0);
    qr_replica_begin(&s, 0);
    qr_replica_begin(&s, 1);
    assert_int_equal(qr_replica_pick(&s, NULL), 2);
    qr_replica_begin(&s, 2);
    /* 1 and 2 have one each: the rotation decides between them, never 0 */
    int x = qr_replica_pick(&s, NULL);
    assert_true(x == 1 || x == 2);
    assert_false(qr_replica_end(&s, 0, true, NULL, 0));
    assert_false(qr_replica_end(&s, 0, true, NULL, 0));
    assert_int_equal(s.r[0].outstanding, 0);
    assert_int_equal(qr_replica_pick(&s, NULL), 0);
    /* tried replicas are skipped; all tried: none */
    bool tried[3] = {true, false, true};
    assert_int_equal(qr_replica_pick(&s, tried), 1);
    tried[1] = true;
    assert_int_equal(qr_replica_pick(&s, tried), -1);
}

static void test_eject_probe_readmit(void **state)
{
    (void) state;
    static struct qr_replica_set s;
    init3(&s);
    qr_replica_begin(&s, 1);
    assert_false(qr_replica_end(&s, 1, false, "connection refused", 1000));
    qr_replica_begin(&s, 1);
    assert_true(qr_replica_end(&s, 1, false, "connection refused", 1000)); /* 2nd in a row */
    assert_int_equal(s.r[1].state, QR_REPLICA_EJECTED);
    assert_string_equal(s.r[1].last_error, "connection refused");
    assert_int_equal(s.r[1].ejections, 1);
    /* no request goes to an ejected replica */
    for (int k = 0; k < 6; k++)
        assert_int_not_equal(qr_replica_pick(&s, NULL), 1);
    /* probed after the backoff: 100 ms, then 200, then capped at 350 */
    int due[3];
    assert_int_equal(qr_replica_probes_due(&s, 1099, due, 3), 0);
    assert_int_equal(qr_replica_probes_due(&s, 1100, due, 3), 1);
    assert_int_equal(due[0], 1);
    qr_replica_probe_result(&s, 1, false, "503", 1100);
    assert_int_equal(s.r[1].next_probe_ms, 1300);
    qr_replica_probe_result(&s, 1, false, "503", 1300);
    assert_int_equal(s.r[1].next_probe_ms, 1650); /* 400 capped to 350 */
    assert_int_equal(s.r[1].ejections, 1);        /* still the same ejection */
    qr_replica_probe_result(&s, 1, true, NULL, 1650);
    assert_int_equal(s.r[1].state, QR_REPLICA_ADMITTED);
    assert_int_equal(s.r[1].readmissions, 1);
    assert_int_equal(s.r[1].consecutive_failures, 0);
    /* a success between failures resets the count: no ejection */
    qr_replica_begin(&s, 0);
    qr_replica_end(&s, 0, false, "reset", 2000);
    qr_replica_begin(&s, 0);
    qr_replica_end(&s, 0, true, NULL, 2000);
    qr_replica_begin(&s, 0);
    assert_false(qr_replica_end(&s, 0, false, "reset", 2000));
    assert_int_equal(s.r[0].state, QR_REPLICA_ADMITTED);
    assert_int_equal(s.r[0].failures, 2);
    /* a new ejection after a re-admission starts from the initial backoff again */
    qr_replica_begin(&s, 1);
    qr_replica_end(&s, 1, false, "x", 3000);
    qr_replica_begin(&s, 1);
    assert_true(qr_replica_end(&s, 1, false, "x", 3000));
    assert_int_equal(s.r[1].next_probe_ms, 3100);
    assert_int_equal(s.r[1].ejections, 2);
}

static void test_retry_rules(void **state)
{
    (void) state;
    static struct qr_replica_set s;
    init3(&s);
    bool tried[3] = {true, false, false};
    assert_true(qr_replica_may_retry(&s, false, true, tried));
    assert_false(qr_replica_may_retry(&s, true, true, tried));   /* bytes reached the client */
    assert_false(qr_replica_may_retry(&s, false, false, tried)); /* not retryable (a 4xx) */
    tried[1] = tried[2] = true;
    assert_false(qr_replica_may_retry(&s, false, true, tried)); /* each replica once */
    tried[2] = false;
    s.r[2].state = QR_REPLICA_EJECTED;
    assert_false(qr_replica_may_retry(&s, false, true, tried)); /* only admitted ones */
    /* every replica ejected: nothing to pick */
    s.r[0].state = s.r[1].state = QR_REPLICA_EJECTED;
    assert_int_equal(qr_replica_pick(&s, NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_validates),
        cmocka_unit_test(test_least_outstanding_round_robin),
        cmocka_unit_test(test_eject_probe_readmit),
        cmocka_unit_test(test_retry_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
