/* Engine version ordering and constraints: digit runs compare as numbers of any length, other
 * runs must be equal (so "0.7.0" and "b11669" never order), and constraint lists match when any
 * constraint's clauses all hold. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy/version.h"

static void test_cmp(void **state)
{
    (void) state;
    assert_int_equal(qr_version_cmp("0.7.0", "0.7.0"), QR_VERSION_EQUAL);
    assert_int_equal(qr_version_cmp("0.11.11", "0.12.0"), QR_VERSION_LESS);
    assert_int_equal(qr_version_cmp("0.12.0", "0.9.9"), QR_VERSION_GREATER);
    assert_int_equal(qr_version_cmp("b11669", "b9211"), QR_VERSION_GREATER);
    assert_int_equal(qr_version_cmp("b09211", "b9211"), QR_VERSION_EQUAL);
    assert_int_equal(qr_version_cmp("0.7", "0.7.1"), QR_VERSION_LESS);
    assert_int_equal(qr_version_cmp("0.7.0", "b11669"), QR_VERSION_INCOMPARABLE);
    assert_int_equal(qr_version_cmp("0.7.0", "0-7-0"), QR_VERSION_INCOMPARABLE);
    assert_int_equal(qr_version_cmp("99999999999999999999999", "99999999999999999999998"),
                     QR_VERSION_GREATER);
}

static void test_constraints(void **state)
{
    (void) state;
    assert_true(qr_version_constraint_valid("*"));
    assert_true(qr_version_constraint_valid(">=b9211"));
    assert_true(qr_version_constraint_valid(">=0.11.0 <0.12.0"));
    assert_true(qr_version_constraint_valid("=0.7.0"));
    assert_false(qr_version_constraint_valid(""));
    assert_false(qr_version_constraint_valid(">="));
    assert_false(qr_version_constraint_valid(">=0.1 <"));
    assert_false(qr_version_constraint_valid("0.7.0;rm"));
    assert_false(qr_version_constraint_valid("=>1"));
    assert_true(qr_version_satisfies(">=b9211", "b11669"));
    assert_false(qr_version_satisfies(">=b9211", "b9210"));
    assert_false(qr_version_satisfies(">=b9211", "0.7.0"));
    assert_true(qr_version_satisfies(">=0.11.0 <0.12.0", "0.11.11"));
    assert_false(qr_version_satisfies(">=0.11.0 <0.12.0", "0.12.0"));
    assert_true(qr_version_satisfies("<=0.12.0", "0.12.0"));
    assert_false(qr_version_satisfies(">0.12.0", "0.12.0"));
    assert_true(qr_version_satisfies("0.7.0", "0.7.0"));
    assert_false(qr_version_satisfies("0.7.0", NULL));
    const char *c[] = {"<b9000", "b11669"};
    const char *v[] = {"0.7.0", "b11669"};
    assert_true(qr_version_list_match(c, 2, v, 2));
    assert_false(qr_version_list_match(c, 2, v, 1));
    assert_false(qr_version_list_match(c, 2, NULL, 0));
    assert_true(qr_version_list_match(NULL, 0, NULL, 0));
    const char *any[] = {"*"};
    assert_true(qr_version_list_match(any, 1, NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmp),
        cmocka_unit_test(test_constraints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
