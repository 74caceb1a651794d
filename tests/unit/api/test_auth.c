/* Security gate pieces: bearer token check, loopback Host names (DNS rebinding guard), and the
 * error enum's mapping to HTTP status and code. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "api/api.h"
#include "core/err.h"

static void test_bearer(void **state)
{
    assert_true(qr_api_auth_ok("Bearer s3cret", "s3cret"));
    assert_true(qr_api_auth_ok("bearer s3cret", "s3cret")); /* scheme is case-insensitive */
    assert_true(qr_api_auth_ok("Bearer   s3cret  ", "s3cret"));
    assert_false(qr_api_auth_ok("Bearer s3cre", "s3cret"));
    assert_false(qr_api_auth_ok("Bearer s3cretX", "s3cret"));
    assert_false(qr_api_auth_ok("Bearer S3CRET", "s3cret"));
    assert_false(qr_api_auth_ok("Basic s3cret", "s3cret"));
    assert_false(qr_api_auth_ok("s3cret", "s3cret"));
    assert_false(qr_api_auth_ok("Bearer ", "s3cret"));
    assert_false(qr_api_auth_ok(NULL, "s3cret"));
    assert_false(qr_api_auth_ok("Bearer ", "")); /* an empty token never matches */
}

static void test_loopback_hosts(void **state)
{
    const char *ok[] = {"localhost", "localhost:11450", "LOCALHOST",
                        "127.0.0.1", "127.0.0.1:11450", "127.1.2.3:80",
                        "[::1]",     "[::1]:11450",     "localhost.:11450"};
    const char *bad[] = {"evil.example",
                         "evil.example:11450",
                         "localhost.evil.example",
                         "127.0.0.1.evil.example",
                         "10.0.0.1",
                         "[::2]:1",
                         "[::1]x",
                         "",
                         ":11450",
                         "0.0.0.0"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (!qr_api_host_is_loopback_name(ok[i]))
            fail_msg("'%s' should be accepted", ok[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (qr_api_host_is_loopback_name(bad[i]))
            fail_msg("'%s' should be refused", bad[i]);
    }
}

static void test_error_mapping(void **state)
{
    assert_int_equal(qr_err_http_status(QR_ERR_TOO_LARGE), 413);
    assert_string_equal(qr_err_str(QR_ERR_TOO_LARGE), "request_too_large");
    assert_int_equal(qr_err_http_status(QR_ERR_UPSTREAM), 502);
    assert_string_equal(qr_err_str(QR_ERR_UPSTREAM), "upstream_error");
    assert_int_equal(qr_err_http_status(QR_ERR_UPSTREAM_TIMEOUT), 504);
    assert_string_equal(qr_err_str(QR_ERR_UPSTREAM_TIMEOUT), "upstream_timeout");
    assert_int_equal(qr_err_http_status(QR_ERR_UNAUTHORIZED), 401);
    assert_string_equal(qr_err_str(QR_ERR_UNAUTHORIZED), "unauthorized");
    assert_int_equal(qr_err_http_status(QR_ERR_METHOD), 405);
    assert_string_equal(qr_err_str(QR_ERR_METHOD), "method_not_allowed");
    assert_int_equal(qr_err_http_status(QR_ERR_UNAVAILABLE), 503);
    assert_string_equal(qr_err_str(QR_ERR_UNAVAILABLE), "upstream_unavailable");
    assert_int_equal(qr_err_http_status(QR_ERR_NOT_FOUND), 404);
    assert_string_equal(qr_err_str(QR_ERR_NOT_FOUND), "not_found");
    assert_string_equal(qr_err_str((enum qr_err) 9999), "unknown_error");
    assert_int_equal(qr_err_http_status((enum qr_err) 9999), 500);
    /* every value has a distinct name */
    for (int a = 0; a < QR_ERR__COUNT; a++) {
        for (int b = a + 1; b < QR_ERR__COUNT; b++)
            assert_string_not_equal(qr_err_str((enum qr_err) a), qr_err_str((enum qr_err) b));
    }
    struct qr_diag d;
    assert_int_equal(qr_diag_set(&d, QR_ERR_INVALID, "bad '%s'", "x"), QR_ERR_INVALID);
    assert_string_equal(d.msg, "bad 'x'");
    assert_int_equal(qr_diag_set(NULL, QR_ERR_IO, "ignored"), QR_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_loopback_hosts),
        cmocka_unit_test(test_error_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
