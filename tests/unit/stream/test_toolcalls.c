/* Tool-call assembly: runtime indices by TOOL_BEGIN order whatever the upstream numbered,
 * TOOL_BEGIN held until the name is known (arguments buffered meanwhile), ids kept or
 * synthesized once, a new id on a reused upstream index starts a new call, whole calls by
 * arrival, TOOL_END for every open call at finish, caps. Every sequence passes qr_answer_add. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/event.h"
#include "stream/toolcalls.h"

#define S(x) ((struct qr_slice){(x), sizeof(x) - 1})
#define NONE ((struct qr_slice){"", 0})

struct rec {
    struct qr_buf log;
    struct qr_answer ans;
    enum qr_err contract;
    enum qr_err fail_with; /* returned by the consumer from event number fail_at on */
    int fail_at, n;
};

static enum qr_err rec_fn(void *arg, const struct qr_event *ev)
{
    struct rec *r = arg;
    if (r->fail_with && ++r->n >= r->fail_at)
        return r->fail_with;
    switch (ev->type) {
    case QR_EV_TOOL_BEGIN: {
        bool synth = ev->id.len == 29 && memcmp(ev->id.ptr, "call_", 5) == 0;
        qr_buf_appendf(&r->log, "B%u %.*s %.*s\n", ev->index, synth ? 5 : (int) ev->id.len,
                       synth ? "SYNTH" : ev->id.ptr, (int) ev->name.len, ev->name.ptr);
        break;
    }
    case QR_EV_TOOL_ARGS:
        qr_buf_appendf(&r->log, "A%u %.*s\n", ev->index, (int) ev->text.len, ev->text.ptr);
        break;
    case QR_EV_TOOL_END:
        qr_buf_appendf(&r->log, "E%u\n", ev->index);
        break;
    default:
        qr_buf_puts(&r->log, "?\n");
    }
    enum qr_err err = qr_answer_add(&r->ans, ev);
    if (err && !r->contract)
        r->contract = err;
    return QR_OK;
}

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    qr_buf_init(&r->log, 0);
    qr_buf_puts(&r->log, "");
    qr_answer_init(&r->ans, 0);
    struct qr_event start = {.type = QR_EV_START};
    qr_answer_add(&r->ans, &start);
}

static void rec_done(struct rec *r)
{
    struct qr_event done = {.type = QR_EV_DONE, .finish = QR_FINISH_TOOL_CALLS};
    if (!r->contract)
        r->contract = qr_answer_add(&r->ans, &done);
    assert_int_equal(r->contract, QR_OK);
}

static void rec_cleanup(struct rec *r)
{
    qr_buf_cleanup(&r->log);
    qr_answer_cleanup(&r->ans);
}

static void test_openai_deltas(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    /* upstream indices 3 and 7 become 0 and 1; the first delta has no arguments */
    assert_int_equal(qr_toolcalls_delta(&t, 3, S("id-a"), S("fa"), NONE, rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 3, NONE, NONE, S("{\"x\""), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 7, S("id-b"), S("fb"), S("{"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 3, NONE, NONE, S(":1}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 7, S("id-b"), NONE, S("}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_count(&t), 2);
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK); /* idempotent */
    assert_string_equal(r.log.ptr, "B0 id-a fa\nA0 {\"x\"\nB1 id-b fb\nA1 {\nA0 :1}\nA1 }\n"
                                   "E0\nE1\n");
    rec_done(&r);
    assert_string_equal(r.ans.calls[0].arguments.ptr, "{\"x\":1}");
    assert_string_equal(r.ans.calls[1].arguments.ptr, "{}");
    rec_cleanup(&r);
    qr_toolcalls_cleanup(&t);
}

/* Arguments before the name are held; the id comes with the name; none -> synthesized once. */
static void test_name_late_and_synth_id(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S("{\"a\""), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 1, NONE, S("second"), S("{}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S(":"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, S("first"), S("2}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK);
    /* the call named first gets index 0: indices follow TOOL_BEGIN order */
    assert_string_equal(r.log.ptr, "B0 SYNTH second\nA0 {}\nB1 SYNTH first\nA1 {\"a\":\nA1 2}\n"
                                   "E0\nE1\n");
    rec_done(&r);
    assert_string_not_equal(r.ans.calls[0].id.ptr, r.ans.calls[1].id.ptr);
    assert_string_equal(r.ans.calls[1].arguments.ptr, "{\"a\":2}");
    rec_cleanup(&r);
    qr_toolcalls_cleanup(&t);
}

/* A call whose name never came is still reported at finish (empty name), arguments intact. */
static void test_never_named(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("x1"), NONE, S("{}"), rec_fn, &r), QR_OK);
    assert_string_equal(r.log.ptr, "");
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK);
    assert_string_equal(r.log.ptr, "B0 x1 \nA0 {}\nE0\n");
    rec_done(&r);
    rec_cleanup(&r);
    qr_toolcalls_cleanup(&t);
}

/* Servers that repeat index 0: a different id starts a new call; the same id continues. */
static void test_index_reuse_new_id(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("a"), S("f"), S("{"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("a"), NONE, S("}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("b"), S("g"), S("{}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S(" "), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK);
    assert_string_equal(r.log.ptr, "B0 a f\nA0 {\nA0 }\nB1 b g\nA1 {}\nA1  \nE0\nE1\n");
    rec_done(&r);
    rec_cleanup(&r);
    qr_toolcalls_cleanup(&t);
}

/* Deltas without an index: a name or id starts a call, a bare fragment continues the last. */
static void test_no_index(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    assert_int_equal(qr_toolcalls_delta(&t, -1, NONE, S("f"), S("{"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, -1, NONE, NONE, S("}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, -1, NONE, S("g"), S("[]"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK);
    assert_string_equal(r.log.ptr, "B0 SYNTH f\nA0 {\nA0 }\nB1 SYNTH g\nA1 []\nE0\nE1\n");
    rec_done(&r);
    rec_cleanup(&r);
    qr_toolcalls_cleanup(&t);
}

/* Whole calls (Ollama, MLX): by arrival; mixed with deltas the indices stay dense. */
static void test_whole_calls(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    assert_int_equal(qr_toolcalls_whole(&t, NONE, S("a"), S("{\"k\":1}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_whole(&t, S("call_x"), S("a"), S("{}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_whole(&t, NONE, S("b"), NONE, rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("d"), S("c"), S("{}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_finish(&t, rec_fn, &r), QR_OK);
    assert_string_equal(r.log.ptr, "B0 SYNTH a\nA0 {\"k\":1}\nE0\nB1 call_x a\nA1 {}\nE1\n"
                                   "B2 SYNTH b\nE2\nB3 d c\nA3 {}\nE3\n");
    rec_done(&r);
    rec_cleanup(&r);
    qr_toolcalls_cleanup(&t);
}

static void test_caps_and_consumer_failure(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 2, 8);
    rec_init(&r);
    assert_int_equal(qr_toolcalls_whole(&t, NONE, S("a"), S("{}"), rec_fn, &r), QR_OK);
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S("0123"), rec_fn, &r), QR_OK);
    /* held arguments past max_bytes */
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S("45678"), rec_fn, &r),
                     QR_ERR_TOO_LARGE);
    /* a third call past max_calls */
    assert_int_equal(qr_toolcalls_whole(&t, NONE, S("c"), S("{}"), rec_fn, &r), QR_ERR_TOO_LARGE);
    /* an id longer than max_bytes (+ the room kept for a synthesized id) */
    qr_toolcalls_cleanup(&t);
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("0123456789012345678901234567890123456789x"),
                                        S("f"), NONE, rec_fn, &r),
                     QR_ERR_TOO_LARGE);
    qr_toolcalls_cleanup(&t);
    rec_cleanup(&r);
    /* the consumer's error comes back as is */
    rec_init(&r);
    r.fail_with = QR_ERR_CANCELLED;
    r.fail_at = 2;
    qr_toolcalls_init(&t, 0, 0);
    assert_int_equal(qr_toolcalls_whole(&t, NONE, S("a"), S("{}"), rec_fn, &r), QR_ERR_CANCELLED);
    qr_toolcalls_cleanup(&t);
    rec_cleanup(&r);
}

/* Structural completeness of the arguments: brackets balanced and strings closed, across
 * fragments, with escaped quotes and brackets inside strings ignored. */
static void test_complete(void **state)
{
    struct qr_toolcalls t;
    struct rec r;
    qr_toolcalls_init(&t, 0, 0);
    rec_init(&r);
    assert_true(qr_toolcalls_complete(&t));
    assert_int_equal(qr_toolcalls_delta(&t, 0, S("a"), S("f"), NONE, rec_fn, &r), QR_OK);
    assert_true(qr_toolcalls_complete(&t)); /* no arguments yet */
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S("{\"s\": \"x\\\"}"), rec_fn, &r),
                     QR_OK);
    assert_false(qr_toolcalls_complete(&t)); /* inside the string after an escaped quote */
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S("]{\", \"l\": [1"), rec_fn, &r),
                     QR_OK);
    assert_false(qr_toolcalls_complete(&t));
    assert_int_equal(qr_toolcalls_delta(&t, 0, NONE, NONE, S("]}"), rec_fn, &r), QR_OK);
    assert_true(qr_toolcalls_complete(&t));
    assert_int_equal(qr_toolcalls_whole(&t, NONE, S("g"), S("{}}"), rec_fn, &r), QR_OK);
    assert_false(qr_toolcalls_complete(&t)); /* a closer without an opener */
    qr_toolcalls_cleanup(&t);
    rec_cleanup(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_deltas),
        cmocka_unit_test(test_name_late_and_synth_id),
        cmocka_unit_test(test_never_named),
        cmocka_unit_test(test_index_reuse_new_id),
        cmocka_unit_test(test_no_index),
        cmocka_unit_test(test_whole_calls),
        cmocka_unit_test(test_caps_and_consumer_failure),
        cmocka_unit_test(test_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
