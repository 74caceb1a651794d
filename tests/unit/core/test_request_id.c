/* Request ids: 24 lowercase hex characters (12 random bytes), no repeats in a large sample. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/http_server.h"

static int cmp(const void *a, const void *b)
{
    return memcmp(a, b, 25);
}

static void test_shape_and_uniqueness(void **state)
{
    enum { N = 20000 };
    char(*ids)[25] = malloc(sizeof(*ids) * N);
    for (int i = 0; i < N; i++) {
        memset(ids[i], 'X', 25);
        qr_http_make_request_id(ids[i]);
        assert_int_equal(strlen(ids[i]), 24);
        assert_int_equal(strspn(ids[i], "0123456789abcdef"), 24);
    }
    qsort(ids, N, 25, cmp);
    for (int i = 1; i < N; i++)
        assert_int_not_equal(memcmp(ids[i - 1], ids[i], 25), 0);
    /* every hex digit shows up in every position over the sample (not a counter) */
    for (int pos = 0; pos < 24; pos++) {
        unsigned seen = 0;
        for (int i = 0; i < N; i++) {
            char ch = ids[i][pos];
            seen |= 1u << (ch <= '9' ? ch - '0' : ch - 'a' + 10);
        }
        assert_int_equal(seen, 0xffffu);
    }
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shape_and_uniqueness)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
