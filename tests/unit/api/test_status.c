/* The status page's memory (api/status.h): the decision ring keeps the newest 64, newest first,
 * with fields cut to their sizes; Accept negotiation of GET / picks the page only for requests
 * preferring HTML. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/status.h"

static void test_ring_keeps_the_newest(void **state)
{
    (void) state;
    qr_status_reset();
    struct qr_status_decision d;
    assert_false(qr_status_decision_at(0, &d));
    for (int i = 0; i < QR_STATUS_DECISIONS + 6; i++) {
        char model[32];
        snprintf(model, sizeof(model), "m%d", i);
        qr_status_note_decision("/v1/chat/completions", model, i % 2 ? "b" : NULL, i % 2 == 0,
                                i % 2 ? 0 : 422, "why");
    }
    size_t n = 0;
    while (qr_status_decision_at(n, &d))
        n++;
    assert_int_equal(n, QR_STATUS_DECISIONS);
    assert_true(qr_status_decision_at(0, &d));
    char want[32];
    snprintf(want, sizeof(want), "m%d", QR_STATUS_DECISIONS + 5);
    assert_string_equal(d.model, want);
    assert_string_equal(d.backend, "b");
    assert_false(d.refused);
    assert_true(qr_status_decision_at(QR_STATUS_DECISIONS - 1, &d));
    assert_string_equal(d.model, "m6"); /* m0..m5 were overwritten */
    assert_true(d.refused);
    assert_int_equal(d.status, 422);
    assert_string_equal(d.backend, "");
    assert_false(qr_status_decision_at(QR_STATUS_DECISIONS, &d));
}

static void test_fields_are_cut(void **state)
{
    (void) state;
    qr_status_reset();
    char long_reason[1000];
    memset(long_reason, 'r', sizeof(long_reason) - 1);
    long_reason[sizeof(long_reason) - 1] = '\0';
    qr_status_note_decision(NULL, long_reason, NULL, true, 503, long_reason);
    struct qr_status_decision d;
    assert_true(qr_status_decision_at(0, &d));
    assert_string_equal(d.route, "");
    assert_int_equal(strlen(d.model), sizeof(d.model) - 1);
    assert_int_equal(strlen(d.reason), sizeof(d.reason) - 1);
}

static void test_accept_negotiation(void **state)
{
    (void) state;
    static const char *const html[] = {
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
        "text/html",
        "TEXT/HTML",
        "text/html;q=0.9, */*;q=0.1",
        "application/json;q=0.5, text/html",
        " text/html ; charset=utf-8",
    };
    static const char *const plain[] = {
        "",
        "*/*",
        "application/json",
        "text/plain",
        "text/plain, text/html;q=0.5",
        "text/html;q=0",
        "text/html;q=x",
        "*/*, text/html;q=0.8",
        "text/htmlx",
        ",,,;;;q=",
    };
    assert_false(qr_status_accept_prefers_html(NULL));
    for (size_t i = 0; i < sizeof(html) / sizeof(html[0]); i++)
        if (!qr_status_accept_prefers_html(html[i]))
            fail_msg("'%s' should prefer HTML", html[i]);
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (qr_status_accept_prefers_html(plain[i]))
            fail_msg("'%s' should not prefer HTML", plain[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_keeps_the_newest),
        cmocka_unit_test(test_fields_are_cut),
        cmocka_unit_test(test_accept_negotiation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
