/* Log lines: valid JSON with escaped values, key=value text form, level filtering that skips
 * evaluating the arguments of a disabled line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "core/log.h"

/* Run fn with stdout redirected into a pipe; return what it wrote. */
static char *capture(void (*fn)(void))
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    int saved = dup(1);
    dup2(p[1], 1);
    fn();
    dup2(saved, 1);
    close(saved);
    close(p[1]);
    static char buf[8192];
    ssize_t n = read(p[0], buf, sizeof(buf) - 1);
    close(p[0]);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static int evaluated;
static const char *side_effect(void)
{
    evaluated++;
    return "x";
}

static void emit_json(void)
{
    qr_log_setup(QR_LOG_INFO, QR_LOG_JSON);
    QR_LOG(QR_LOG_INFO, "hello \"world\"\n", QR_LF_S("path", "/api/chat\x01"),
           QR_LF_N("status", 200), QR_LF_B("aborted", false));
    QR_LOG(QR_LOG_DEBUG, "hidden", QR_LF_S("k", side_effect()));
}

static void emit_text(void)
{
    qr_log_setup(QR_LOG_DEBUG, QR_LOG_TEXT);
    QR_LOG(QR_LOG_WARN, "two words", QR_LF_S("a", "plain"), QR_LF_S("b", "has space"),
           QR_LF_N("n", -5), QR_LF_B("ok", true));
}

static void test_json_line(void **state)
{
    evaluated = 0;
    char *out = capture(emit_json);
    assert_int_equal(evaluated, 0); /* disabled level: arguments not evaluated */
    assert_int_equal(strchr(out, '\n') - out, (long) strlen(out) - 1); /* one line */
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "level")), "info");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "msg")), "hello \"world\"\n");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "path")), "/api/chat\x01");
    assert_int_equal(yyjson_get_int(yyjson_obj_get(root, "status")), 200);
    assert_true(yyjson_is_false(yyjson_obj_get(root, "aborted")));
    assert_non_null(yyjson_obj_get(root, "time"));
    yyjson_doc_free(doc);
}

static void test_text_line(void **state)
{
    char *out = capture(emit_text);
    assert_non_null(
        strstr(out, " level=warn msg=\"two words\" a=plain b=\"has space\" n=-5 ok=true\n"));
    qr_log_setup(QR_LOG_INFO, QR_LOG_JSON);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_json_line),
                                       cmocka_unit_test(test_text_line)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
