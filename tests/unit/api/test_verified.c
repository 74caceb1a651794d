/* Reading a conformance report for the router (qr_verified_report_parse): keys verified are the
 * union of the passing cases' verifies minus every key a failing case refutes; refuted keys keep
 * the first failing case and its reason; skipped cases and names that are no capability key count
 * for nothing; a document that is not a report is refused with the reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/verified.h"

static void test_pass_minus_fail(void **state)
{
    (void) state;
    static const char report[] =
        "{\"schema_version\":\"quantum.runtime/conformance-report/v1alpha1\",\"cases\":["
        "{\"id\":\"identity\",\"verifies\":[\"inference.text\"],\"status\":\"pass\",\"reason\":"
        "\"\"},"
        "{\"id\":\"reasoning.on\",\"verifies\":[\"reasoning.control\"],\"status\":\"fail\","
        "\"reason\":\"content carries </think>\"},"
        "{\"id\":\"streaming\",\"verifies\":[\"streaming.content\",\"streaming.reasoning\"],"
        "\"status\":\"pass\",\"reason\":\"ok\"},"
        "{\"id\":\"stream.reasoning\",\"verifies\":[\"streaming.reasoning\",\"reasoning.control\"],"
        "\"status\":\"fail\",\"reason\":\"second\"},"
        "{\"id\":\"tools\",\"verifies\":[],\"status\":\"skip\",\"reason\":\"not claimed\"},"
        "{\"id\":\"future\",\"verifies\":[\"telepathy\",\"structured_output\"],\"status\":\"pass\","
        "\"reason\":\"\"}]}";
    struct qr_verified_report r;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_verified_report_parse(report, strlen(report), &r, &d), QR_OK);
    assert_true(qr_cap_set_has(r.verified, QR_CAP_INFERENCE_TEXT));
    assert_true(qr_cap_set_has(r.verified, QR_CAP_STREAM_CONTENT));
    assert_true(qr_cap_set_has(r.verified, QR_CAP_STRUCTURED_OUTPUT));
    /* passed in one case, failed in another: refuted, never verified */
    assert_false(qr_cap_set_has(r.verified, QR_CAP_STREAM_REASONING));
    assert_true(qr_cap_set_has(r.refuted, QR_CAP_STREAM_REASONING));
    assert_false(qr_cap_set_has(r.verified, QR_CAP_REASONING_CONTROL));
    assert_true(qr_cap_set_has(r.refuted, QR_CAP_REASONING_CONTROL));
    assert_false(qr_cap_set_has(r.verified, QR_CAP_TOOLS_CALLING));
    assert_false(qr_cap_set_has(r.refuted, QR_CAP_TOOLS_CALLING));
    /* the first failing case names each refuted key */
    assert_string_equal(r.failed[QR_CAP_REASONING_CONTROL].id, "reasoning.on");
    assert_string_equal(r.failed[QR_CAP_REASONING_CONTROL].reason, "content carries </think>");
    assert_string_equal(r.failed[QR_CAP_STREAM_REASONING].id, "stream.reasoning");
    assert_string_equal(r.failed[QR_CAP_INFERENCE_TEXT].id, "");
}

static void test_not_a_report(void **state)
{
    (void) state;
    struct qr_verified_report r;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_verified_report_parse("{\"cases\":", 9, &r, &d), QR_ERR_INVALID);
    assert_string_equal(d.msg, "the report is not JSON");
    assert_int_equal(qr_verified_report_parse("{}", 2, &r, &d), QR_ERR_INVALID);
    assert_string_equal(d.msg, "the report has no 'cases' array");
    static const char no_status[] =
        "{\"cases\":[{\"id\":\"a\",\"verifies\":[\"inference.text\"]}]}";
    assert_int_equal(qr_verified_report_parse(no_status, strlen(no_status), &r, &d),
                     QR_ERR_INVALID);
    assert_string_equal(d.msg, "cases[0]: 'id' and 'status' are required");
    assert_int_equal(qr_verified_report_parse(NULL, 0, &r, &d), QR_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_minus_fail),
        cmocka_unit_test(test_not_a_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
