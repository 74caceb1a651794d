/* The builtin data table (cmake/embed.cmake -> gen/builtin_data.c): one entry per JSON file under
 * data/ file, byte-identical to the file on disk, NUL-terminated, sorted by path, every one valid
 * JSON; qr_builtin_under/qr_builtin_find agree with the table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "core/builtin.h"

#define DATA_DIR QR_TEST_CASES "/../../data"

static size_t count_on_disk(const char *dir, int depth)
{
    /* data/ is at most two levels deep: data/x.json and data/<kind>/x.json */
    char pat[512];
    snprintf(pat, sizeof pat, "%s/%s*.json", dir, depth ? "*/" : "");
    glob_t g;
    size_t n = 0;
    if (glob(pat, 0, NULL, &g) == 0)
        n = g.gl_pathc;
    globfree(&g);
    return n;
}

static void test_table_matches_data_dir(void **state)
{
    (void) state;
    size_t n;
    const struct qr_builtin_file *f = qr_builtin_files(&n);
    assert_int_equal(n, count_on_disk(DATA_DIR, 0) + count_on_disk(DATA_DIR, 1));
    assert_null(f[n].path);
    for (size_t i = 0; i < n; i++) {
        if (i)
            assert_true(strcmp(f[i - 1].path, f[i].path) < 0);
        assert_int_equal(f[i].data[f[i].len], '\0');
        char p[512];
        snprintf(p, sizeof p, "%s/%s", DATA_DIR, f[i].path);
        FILE *fp = fopen(p, "rb");
        assert_non_null(fp);
        char *buf = malloc(f[i].len + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, f[i].len + 1, fp), f[i].len);
        fclose(fp);
        assert_memory_equal(buf, f[i].data, f[i].len);
        free(buf);
        yyjson_read_err err;
        yyjson_doc *doc = yyjson_read_opts((char *) f[i].data, f[i].len, 0, NULL, &err);
        if (!doc)
            fail_msg("data/%s is not JSON: %s at %zu", f[i].path, err.msg, err.pos);
        yyjson_doc_free(doc);
        assert_ptr_equal(qr_builtin_find(f[i].path), &f[i]);
    }
}

static void test_under_and_find(void **state)
{
    (void) state;
    size_t n_all, n;
    const struct qr_builtin_file *all = qr_builtin_files(&n_all);
    const struct qr_builtin_file *first;
    qr_builtin_under("", &first, &n);
    assert_int_equal(n, n_all);
    if (n_all)
        assert_ptr_equal(first, all);
    qr_builtin_under("no-such-kind/", &first, &n);
    assert_int_equal(n, 0);
    assert_null(first);
    assert_null(qr_builtin_find("no-such-file.json"));
    for (size_t i = 0; i < n_all; i++) { /* every file is found under its own directory */
        const char *slash = strrchr(all[i].path, '/');
        char dir[256] = "";
        if (slash)
            snprintf(dir, sizeof dir, "%.*s/", (int) (slash - all[i].path), all[i].path);
        qr_builtin_under(dir, &first, &n);
        assert_true(n >= 1 && first <= &all[i] && &all[i] < first + n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_data_dir),
        cmocka_unit_test(test_under_and_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
