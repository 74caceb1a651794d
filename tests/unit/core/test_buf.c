/* Capped buffers: the cap is never passed, a failed append leaves an empty buffer, JSON string
 * escaping covers quotes, backslashes and control bytes and leaves UTF-8 alone. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

static void test_cap(void **state)
{
    struct qr_buf b;
    qr_buf_init(&b, 10);
    assert_int_equal(qr_buf_puts(&b, "0123456789"), QR_OK);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.ptr, "0123456789");
    assert_int_equal(qr_buf_puts(&b, "x"), QR_ERR_TOO_LARGE);
    assert_null(b.ptr);
    assert_int_equal(b.len, 0);
    assert_int_equal(qr_buf_appendf(&b, "%s-%d", "abc", 42), QR_OK);
    assert_string_equal(b.ptr, "abc-42");
    assert_int_equal(qr_buf_appendf(&b, "%d", 12345), QR_ERR_TOO_LARGE);
    assert_null(b.ptr);
    qr_buf_cleanup(&b);
}

static void test_grow_and_take(void **state)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(qr_buf_append(&b, "ab", 2), QR_OK);
    assert_int_equal(b.len, 20000);
    size_t len;
    char *p = qr_buf_take(&b, &len);
    assert_int_equal(len, 20000);
    assert_int_equal(p[19999], 'b');
    assert_int_equal(p[20000], '\0');
    assert_null(b.ptr);
    free(p);
}

static void test_json_escape(void **state)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    const char in[] = "a\"b\\c\n\t\x01\x1f\xc3\x9f";
    assert_int_equal(qr_buf_append_json_str(&b, in, sizeof(in) - 1), QR_OK);
    assert_string_equal(b.ptr, "a\\\"b\\\\c\\n\\t\\u0001\\u001f\xc3\x9f");
    qr_buf_cleanup(&b);
}

static void test_slices(void **state)
{
    assert_true(qr_slice_eq_nocase(QR_SLICE_LIT("Content-Length"), "content-length"));
    assert_false(qr_slice_eq_nocase(QR_SLICE_LIT("Content-Lengt"), "content-length"));
    assert_true(qr_slice_eq(qr_slice_str("abc"), "abc"));
    assert_false(qr_slice_eq(qr_slice_str("abc"), "ABC"));
}

/* float32 values as the shortest text that reads back exactly (Ollama's embeddings). */
static void test_float32_shortest(void **state)
{
    (void) state;
    static const struct {
        float v;
        const char *want;
    } cases[] = {{0.1f, "0.1"},
                 {0.5f, "0.5"},
                 {-0.25f, "-0.25"},
                 {0.125f, "0.125"},
                 {1.0f, "1"},
                 {0.0f, "0"},
                 {1.0f / 3.0f, "0.33333334"},
                 {1e-7f, "1e-07"},
                 {123456.7f, "123456.7"},
                 {3.4028235e38f, "3.4028235e+38"}};
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = qr_fmt_float32(buf, cases[i].v);
        assert_string_equal(buf, cases[i].want);
        assert_int_equal(n, strlen(cases[i].want));
    }
    /* every value reads back exactly and is never longer than %.9g */
    uint32_t x = 2463534242u;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        float v;
        memcpy(&v, &x, sizeof v);
        if (!isfinite(v))
            continue;
        size_t n = qr_fmt_float32(buf, v);
        assert_true(strtof(buf, NULL) == v);
        char nine[32];
        assert_true(n <= (size_t) snprintf(nine, sizeof nine, "%.9g", (double) v));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_grow_and_take),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_float32_shortest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
