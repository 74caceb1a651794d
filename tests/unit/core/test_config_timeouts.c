/* The per-phase upstream timeout keys (core/config.c): defaults, environment and flag names derived
 * from the keys, 0 refused like upstream_timeout's, reloadable. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

static char *no_env[] = {"HOME=/home/tester", NULL};

static void test_defaults(void **state)
{
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 0, NULL, no_env, &d), QR_OK);
    assert_int_equal(c.upstream_connect_timeout_ms, 10 * 1000);
    assert_int_equal(c.upstream_first_token_timeout_ms, 5 * 60 * 1000);
    assert_int_equal(c.upstream_idle_timeout_ms, 2 * 60 * 1000);
    assert_int_equal(c.upstream_timeout_ms, 15 * 60 * 1000);
    qr_config_cleanup(&c);
}

static void test_env_and_flags(void **state)
{
    char *env[] = {"HOME=/home/tester", "QUANTUM_RUNTIME_UPSTREAM_CONNECT_TIMEOUT=250ms",
                   "QUANTUM_RUNTIME_UPSTREAM_FIRST_TOKEN_TIMEOUT=1m30s",
                   "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT=45s", NULL};
    char *argv[] = {"--upstream-idle-timeout", "300ms", "--upstream-first-token-timeout=2s"};
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 3, argv, env, &d), QR_OK);
    assert_int_equal(c.upstream_connect_timeout_ms, 250);
    assert_int_equal(c.source[QR_CFG_UPSTREAM_CONNECT_TIMEOUT], QR_SRC_ENV);
    assert_int_equal(c.upstream_first_token_timeout_ms, 2000); /* flag beats env */
    assert_int_equal(c.source[QR_CFG_UPSTREAM_FIRST_TOKEN_TIMEOUT], QR_SRC_FLAG);
    assert_int_equal(c.upstream_idle_timeout_ms, 300);
    assert_int_equal(c.source[QR_CFG_UPSTREAM_IDLE_TIMEOUT], QR_SRC_FLAG);
    qr_config_cleanup(&c);
}

static void test_zero_and_garbage_refused(void **state)
{
    static const char *const bad[] = {
        "QUANTUM_RUNTIME_UPSTREAM_CONNECT_TIMEOUT=0",
        "QUANTUM_RUNTIME_UPSTREAM_FIRST_TOKEN_TIMEOUT=0s",
        "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT=15",
        "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT=25h",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *env[] = {(char *) bad[i], NULL};
        struct qr_config c;
        struct qr_diag d = {{0}};
        assert_int_equal(qr_config_load(&c, 0, NULL, env, &d), QR_ERR_CONFIG);
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int) strcspn(bad[i], "="), bad[i]);
        if (!strstr(d.msg, name))
            fail_msg("'%s': the message does not name the variable: %s", bad[i], d.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_env_and_flags),
        cmocka_unit_test(test_zero_and_garbage_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
