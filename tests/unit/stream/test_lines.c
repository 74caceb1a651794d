/* Line framing and SSE fields: every terminator, the same lines whatever the chunking, the
 * max_line bound (including that nothing past max_line + 2 bytes is read), and every SSE field
 * form the WHATWG rules name. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stream/lines.h"

/* Run the framer over in[0..len) delivered as two chunks split at `split`, keeping the unconsumed
 * tail in a pending buffer as a real reader does. Lines go into out as "[line]"; a too-long line
 * as "!"; bytes left over at the end as "~n". */
static void frame(const char *in, size_t len, size_t split, bool allow_cr, size_t max_line,
                  char *out, size_t cap)
{
    char pend[512];
    size_t plen = 0, o = 0;
    out[0] = '\0';
    for (int part = 0; part < 3; part++) {
        bool final = part == 2;
        if (part == 0) {
            memcpy(pend, in, split);
            plen = split;
        } else if (part == 1) {
            memcpy(pend + plen, in + split, len - split);
            plen += len - split;
        }
        for (;;) {
            struct qr_slice line;
            size_t used;
            enum qr_line_status st =
                qr_line_next(pend, plen, max_line, allow_cr, final, &line, &used);
            if (st == QR_LINE_TOO_LONG) {
                o += (size_t) snprintf(out + o, cap - o, "!");
                return;
            }
            if (st == QR_LINE_NEED_MORE) {
                assert_int_equal(used, 0);
                break;
            }
            assert_int_equal(st, QR_LINE_OK);
            assert_true(used > line.len || (final && used == line.len));
            assert_ptr_equal(line.ptr, pend);
            o += (size_t) snprintf(out + o, cap - o, "[%.*s]", (int) line.len, line.ptr);
            memmove(pend, pend + used, plen - used);
            plen -= used;
        }
    }
    if (plen)
        snprintf(out + o, cap - o, "~%zu", plen);
}

/* The whole input, and every two-chunk split of it, frame to `want`. */
static void check_all_splits(const char *in, bool allow_cr, size_t max_line, const char *want)
{
    size_t len = strlen(in);
    char got[1024];
    for (size_t split = 0; split <= len; split++) {
        frame(in, len, split, allow_cr, max_line, got, sizeof(got));
        if (strcmp(got, want) != 0)
            fail_msg("split at %zu: got '%s', want '%s'", split, got, want);
    }
}

static void test_terminators(void **state)
{
    check_all_splits("a\nb\r\nc\rd", true, 100, "[a][b][c][d]");
    check_all_splits("a\nb\r\nc\rd", false, 100, "[a][b][c\rd]");
    check_all_splits("\n\r\n\r\r\n", true, 100, "[][][][]");
    check_all_splits("x\r", true, 100, "[x]");
    check_all_splits("x\r", false, 100, "[x\r]");
    check_all_splits("\r\n\r\n", false, 100, "[][]");
    check_all_splits("data: 1\n\ndata: 2\r\n\r\n", true, 100, "[data: 1][][data: 2][]");
    check_all_splits("ß🙂\nend", true, 100, "[ß🙂][end]");
    check_all_splits("", true, 100, "");
}

static void test_need_more_and_final(void **state)
{
    struct qr_slice line;
    size_t used = 99;
    assert_int_equal(qr_line_next("abc", 3, 100, true, false, &line, &used), QR_LINE_NEED_MORE);
    assert_int_equal(used, 0);
    assert_int_equal(qr_line_next("abc", 3, 100, true, true, &line, &used), QR_LINE_OK);
    assert_int_equal(used, 3);
    assert_int_equal(line.len, 3);
    /* A "\r" ending the buffer may be half of "\r\n", in both modes. */
    assert_int_equal(qr_line_next("ab\r", 3, 100, true, false, &line, &used), QR_LINE_NEED_MORE);
    assert_int_equal(qr_line_next("ab\r", 3, 100, false, false, &line, &used), QR_LINE_NEED_MORE);
    assert_int_equal(qr_line_next("ab\r", 3, 100, true, true, &line, &used), QR_LINE_OK);
    assert_int_equal(line.len, 2);
    assert_int_equal(used, 3);
    assert_int_equal(qr_line_next("ab\r\n", 4, 100, true, false, &line, &used), QR_LINE_OK);
    assert_int_equal(line.len, 2);
    assert_int_equal(used, 4);
    /* Nothing at all is never a line, final or not. */
    assert_int_equal(qr_line_next("", 0, 100, true, true, &line, &used), QR_LINE_NEED_MORE);
    assert_int_equal(used, 0);
}

static void test_max_line(void **state)
{
    struct qr_slice line;
    size_t used;
    /* Exactly max_line bytes with each terminator is a line. */
    assert_int_equal(qr_line_next("abcd\n", 5, 4, true, false, &line, &used), QR_LINE_OK);
    assert_int_equal(line.len, 4);
    assert_int_equal(qr_line_next("abcd\r\n", 6, 4, false, false, &line, &used), QR_LINE_OK);
    assert_int_equal(used, 6);
    assert_int_equal(qr_line_next("abcd\rx", 6, 4, true, false, &line, &used), QR_LINE_OK);
    assert_int_equal(used, 5);
    assert_int_equal(qr_line_next("abcd", 4, 4, true, true, &line, &used), QR_LINE_OK);
    assert_int_equal(qr_line_next("abcd", 4, 4, true, false, &line, &used), QR_LINE_NEED_MORE);
    assert_int_equal(qr_line_next("abcd\r", 5, 4, false, false, &line, &used), QR_LINE_NEED_MORE);
    /* One byte more is too long, terminated or not, final or not. */
    assert_int_equal(qr_line_next("abcde\n", 6, 4, true, false, &line, &used), QR_LINE_TOO_LONG);
    assert_int_equal(used, 0);
    assert_int_equal(qr_line_next("abcde", 5, 4, true, false, &line, &used), QR_LINE_TOO_LONG);
    assert_int_equal(qr_line_next("abcde", 5, 4, true, true, &line, &used), QR_LINE_TOO_LONG);
    assert_int_equal(qr_line_next("abcd\rx", 6, 4, false, false, &line, &used), QR_LINE_TOO_LONG);
    assert_int_equal(qr_line_next("x\n", 2, 0, true, false, &line, &used), QR_LINE_TOO_LONG);
    assert_int_equal(qr_line_next("\n", 1, 0, true, false, &line, &used), QR_LINE_OK);
    /* Earlier short lines are unaffected by a long one after them. */
    check_all_splits("ab\ncd\nefghij\n", true, 4, "[ab][cd]!");
}

/* The framer must not read past max_line + 2 bytes, whatever len says: the bytes after that are
 * an unmapped page. */
static void test_bounded_scan(void **state)
{
    long page = sysconf(_SC_PAGESIZE);
    char *map =
        mmap(NULL, (size_t) page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + page, (size_t) page, PROT_NONE), 0);
    const size_t max_line = 100;
    char *buf = map + page - (max_line + 2);
    memset(buf, 'x', max_line + 2);
    struct qr_slice line;
    size_t used;
    assert_int_equal(qr_line_next(buf, 1 << 20, max_line, false, false, &line, &used),
                     QR_LINE_TOO_LONG);
    assert_int_equal(qr_line_next(buf, 1 << 20, max_line, true, true, &line, &used),
                     QR_LINE_TOO_LONG);
    buf[max_line] = '\r'; /* the one place where the byte after is needed */
    buf[max_line + 1] = '\n';
    assert_int_equal(qr_line_next(buf, 1 << 20, max_line, false, false, &line, &used), QR_LINE_OK);
    assert_int_equal(line.len, max_line);
    assert_int_equal(used, max_line + 2);
    munmap(map, (size_t) page * 2);
}

static void sse(const char *text, enum qr_sse_kind kind, const char *name, const char *value)
{
    struct qr_sse_field f;
    memset(&f, 0xa5, sizeof(f));
    qr_sse_field_parse(qr_slice_str(text), &f);
    if (f.kind != kind)
        fail_msg("'%s': kind %d, want %d", text, (int) f.kind, (int) kind);
    if (f.name.len != strlen(name) || memcmp(f.name.ptr, name, f.name.len) != 0)
        fail_msg("'%s': name '%.*s', want '%s'", text, (int) f.name.len, f.name.ptr, name);
    if (f.value.len != strlen(value) || memcmp(f.value.ptr, value, f.value.len) != 0)
        fail_msg("'%s': value '%.*s', want '%s'", text, (int) f.value.len, f.value.ptr, value);
    /* Slices always point into the line (or just past it), never elsewhere. */
    assert_true(f.name.ptr >= text && f.name.ptr + f.name.len <= text + strlen(text));
    assert_true(f.value.ptr >= text && f.value.ptr + f.value.len <= text + strlen(text));
}

static void test_sse_fields(void **state)
{
    sse("data:x", QR_SSE_FIELD, "data", "x");
    sse("data: x", QR_SSE_FIELD, "data", "x");
    sse("data:  x", QR_SSE_FIELD, "data", " x");
    sse("data: x ", QR_SSE_FIELD, "data", "x ");
    sse("data", QR_SSE_FIELD, "data", "");
    sse("data:", QR_SSE_FIELD, "data", "");
    sse("data: ", QR_SSE_FIELD, "data", "");
    sse("data: {\"a\":\"b:c\"}", QR_SSE_FIELD, "data", "{\"a\":\"b:c\"}");
    sse("event: error", QR_SSE_FIELD, "event", "error");
    sse("id: 42", QR_SSE_FIELD, "id", "42");
    sse("retry:1000", QR_SSE_FIELD, "retry", "1000");
    sse("x-custom: y", QR_SSE_FIELD, "x-custom", "y");
    sse(":comment", QR_SSE_COMMENT, "", "comment");
    sse(": keep-alive", QR_SSE_COMMENT, "", " keep-alive");
    sse(":", QR_SSE_COMMENT, "", "");
    sse("", QR_SSE_BLANK, "", "");
    sse(" data: x", QR_SSE_FIELD, " data", "x");
    sse("data:\tx", QR_SSE_FIELD, "data", "\tx");
    /* An empty line may come as a NULL slice. */
    struct qr_sse_field f;
    qr_sse_field_parse((struct qr_slice){NULL, 0}, &f);
    assert_int_equal(f.kind, QR_SSE_BLANK);
    assert_int_equal(f.name.len + f.value.len, 0);
    struct qr_slice line;
    size_t used;
    assert_int_equal(qr_line_next(NULL, 0, 10, true, true, &line, &used), QR_LINE_NEED_MORE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terminators), cmocka_unit_test(test_need_more_and_final),
        cmocka_unit_test(test_max_line),    cmocka_unit_test(test_bounded_scan),
        cmocka_unit_test(test_sse_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
