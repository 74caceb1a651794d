/* core/json_strict.c: duplicate keys (small objects pairwise, large ones sorted), nesting depth at
 * and past QR_JSON_MAX_DEPTH, NUL characters in keys and strings; what passes is untouched. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_strict.h"

/* Parse text and run the check; why (when not NULL) receives the reason. */
static bool strict(const char *text, char *why, size_t cap)
{
    yyjson_doc *d = yyjson_read(text, strlen(text), 0);
    assert_non_null(d);
    char local[128];
    bool ok =
        qr_json_strict_ok(yyjson_doc_get_root(d), why ? why : local, why ? cap : sizeof local);
    yyjson_doc_free(d);
    return ok;
}

static void expect_refused(const char *text, const char *reason)
{
    char why[128];
    if (strict(text, why, sizeof why) || !strstr(why, reason))
        fail_msg("%.80s: wanted a refusal naming '%s', got '%s'", text, reason, why);
}

static void test_accepts_ordinary_bodies(void **st)
{
    (void) st;
    char why[128] = "x";
    assert_true(strict("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"options\":{\"seed\":1},\"a\":{\"seed\":2}}",
                       why, sizeof why));
    assert_string_equal(why, "");
    assert_true(strict("[]", NULL, 0));
    assert_true(strict("\"Grüß \\u00e4\"", NULL, 0));
    assert_true(qr_json_strict_ok(NULL, why, sizeof why));
}

static void test_duplicate_keys(void **st)
{
    (void) st;
    expect_refused("{\"model\":\"a\",\"model\":\"b\"}", "duplicate key 'model'");
    expect_refused("{\"x\":[{\"k\":1,\"j\":2,\"k\":3}]}", "duplicate key 'k'");
    /* keys that share a prefix are different keys */
    assert_true(strict("{\"ab\":1,\"a\":2,\"abc\":3}", NULL, 0));
    /* a large object takes the sorted path: 40 distinct keys pass, one repeat is found */
    char big[2048];
    size_t n = 0;
    n += (size_t) snprintf(big + n, sizeof big - n, "{");
    for (int i = 0; i < 40; i++)
        n += (size_t) snprintf(big + n, sizeof big - n, "%s\"k%d\":%d", i ? "," : "", i, i);
    snprintf(big + n, sizeof big - n, "}");
    assert_true(strict(big, NULL, 0));
    big[n] = '\0';
    snprintf(big + n, sizeof big - n, ",\"k17\":0}");
    expect_refused(big, "duplicate key 'k17'");
}

/* [[[...]]] with depth containers */
static char *nested(unsigned depth)
{
    char *s = malloc(2u * depth + 1);
    assert_non_null(s);
    memset(s, '[', depth);
    memset(s + depth, ']', depth);
    s[2u * depth] = '\0';
    return s;
}

static void test_depth(void **st)
{
    (void) st;
    char *ok = nested(QR_JSON_MAX_DEPTH);
    assert_true(strict(ok, NULL, 0));
    free(ok);
    char *deep = nested(QR_JSON_MAX_DEPTH + 1);
    expect_refused(deep, "nesting deeper than 64 levels");
    free(deep);
    char *very = nested(10000);
    expect_refused(very, "nesting deeper");
    free(very);
}

static void test_nul_characters(void **st)
{
    (void) st;
    expect_refused("{\"model\":\"a\\u0000b\"}", "NUL character");
    expect_refused("{\"a\\u0000\":1}", "a key contains a NUL character");
    expect_refused("[\"ok\",[\"\\u0000\"]]", "NUL character");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_ordinary_bodies),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_nul_characters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
