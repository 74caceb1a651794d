/* The event aggregate and the order contract it enforces: a full stream aggregates to exactly what
 * was sent; each kind of order violation is refused with QR_ERR_INTERNAL; the byte cap holds and
 * leaves what was stored intact; embeddings arrive in any order, once each, and are copied. Also
 * the finish-reason names, usage defaults and synthesized tool-call ids. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "contract/event.h"

static struct qr_event ev_of(enum qr_event_type type)
{
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    qr_usage_init(&ev.usage);
    ev.slot_id = -1;
    return ev;
}

static enum qr_err add(struct qr_answer *a, enum qr_event_type type)
{
    struct qr_event ev = ev_of(type);
    return qr_answer_add(a, &ev);
}

static enum qr_err add_text(struct qr_answer *a, enum qr_event_type type, const char *s)
{
    struct qr_event ev = ev_of(type);
    ev.text = qr_slice_str(s);
    return qr_answer_add(a, &ev);
}

static enum qr_err begin(struct qr_answer *a, uint32_t index, const char *id, const char *name)
{
    struct qr_event ev = ev_of(QR_EV_TOOL_BEGIN);
    ev.index = index;
    ev.id = qr_slice_str(id);
    ev.name = qr_slice_str(name);
    return qr_answer_add(a, &ev);
}

static enum qr_err args(struct qr_answer *a, uint32_t index, const char *s)
{
    struct qr_event ev = ev_of(QR_EV_TOOL_ARGS);
    ev.index = index;
    ev.text = qr_slice_str(s);
    return qr_answer_add(a, &ev);
}

static enum qr_err end(struct qr_answer *a, uint32_t index)
{
    struct qr_event ev = ev_of(QR_EV_TOOL_END);
    ev.index = index;
    return qr_answer_add(a, &ev);
}

static enum qr_err done(struct qr_answer *a, enum qr_finish f)
{
    struct qr_event ev = ev_of(QR_EV_DONE);
    ev.finish = f;
    return qr_answer_add(a, &ev);
}

static enum qr_err embedding(struct qr_answer *a, uint32_t index, const float *v, size_t dims)
{
    struct qr_event ev = ev_of(QR_EV_EMBEDDING);
    ev.index = index;
    ev.vec = v;
    ev.dims = dims;
    return qr_answer_add(a, &ev);
}

static void started(struct qr_answer *a, size_t max_bytes)
{
    qr_answer_init(a, max_bytes);
    struct qr_event ev = ev_of(QR_EV_START);
    ev.model = qr_slice_str("m1");
    ev.name = qr_slice_str("llamacpp");
    assert_int_equal(qr_answer_add(a, &ev), QR_OK);
}

static void test_full_stream(void **state)
{
    struct qr_answer a;
    started(&a, 0);
    assert_true(a.started);
    assert_string_equal(a.model.ptr, "m1");
    assert_int_equal(add_text(&a, QR_EV_REASONING, "I "), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_REASONING, "reason"), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "Hel"), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, ""), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "lo ß"), QR_OK);
    assert_int_equal(begin(&a, 0, "call_a", "get_weather"), QR_OK);
    assert_int_equal(args(&a, 0, "{\"city\":"), QR_OK);
    assert_int_equal(begin(&a, 1, "call_b", "get_time"), QR_OK);
    assert_int_equal(args(&a, 0, "\"Paris\"}"), QR_OK);
    assert_int_equal(args(&a, 1, "{}"), QR_OK);
    assert_int_equal(end(&a, 1), QR_OK);
    assert_int_equal(end(&a, 0), QR_OK);

    struct qr_event meta = ev_of(QR_EV_META);
    meta.slot_id = 3;
    meta.id = qr_slice_str("chatcmpl-up");
    meta.usage.cached_tokens = 7;
    assert_int_equal(qr_answer_add(&a, &meta), QR_OK);

    struct qr_event u = ev_of(QR_EV_USAGE);
    u.usage.prompt_tokens = 10;
    u.usage.completion_tokens = 5;
    u.usage.eval_ns = 123;
    assert_int_equal(qr_answer_add(&a, &u), QR_OK);

    struct qr_event d = ev_of(QR_EV_DONE);
    d.finish = QR_FINISH_TOOL_CALLS;
    d.raw_finish = qr_slice_str("tool_calls");
    assert_int_equal(qr_answer_add(&a, &d), QR_OK);

    assert_string_equal(a.reasoning.ptr, "I reason");
    assert_string_equal(a.content.ptr, "Hello ß");
    assert_int_equal(a.n_calls, 2);
    assert_string_equal(a.calls[0].id.ptr, "call_a");
    assert_string_equal(a.calls[0].name.ptr, "get_weather");
    assert_string_equal(a.calls[0].arguments.ptr, "{\"city\":\"Paris\"}");
    assert_true(a.calls[0].ended);
    assert_string_equal(a.calls[1].id.ptr, "call_b");
    assert_string_equal(a.calls[1].arguments.ptr, "{}");
    assert_int_equal(a.slot_id, 3);
    assert_string_equal(a.upstream_id.ptr, "chatcmpl-up");
    assert_true(a.has_usage);
    assert_int_equal(a.usage.prompt_tokens, 10);
    assert_int_equal(a.usage.completion_tokens, 5);
    assert_int_equal(a.usage.cached_tokens, 7); /* from META, kept by USAGE's -1 */
    assert_int_equal(a.usage.eval_ns, 123);
    assert_int_equal(a.usage.load_ns, -1);
    assert_true(a.done);
    assert_false(a.failed);
    assert_int_equal(a.finish, QR_FINISH_TOOL_CALLS);
    assert_string_equal(a.raw_finish.ptr, "tool_calls");
    size_t text = strlen("I reason") + strlen("Hello ß") + strlen("{\"city\":\"Paris\"}") + 2;
    size_t ids = strlen("call_a") + strlen("get_weather") + strlen("call_b") + strlen("get_time");
    assert_int_equal(a.held, text + ids);

    qr_answer_cleanup(&a);
    assert_int_equal(a.n_calls, 0);
    assert_null(a.calls);
    assert_null(a.content.ptr);
    assert_false(a.started);
    qr_answer_cleanup(&a); /* twice is harmless */
}

static void test_error_stream(void **state)
{
    struct qr_answer a;
    started(&a, 0);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "partial"), QR_OK);
    assert_int_equal(begin(&a, 0, "call_x", "f"), QR_OK);
    struct qr_event e = ev_of(QR_EV_ERROR);
    e.status = 504;
    e.code = qr_slice_str("upstream_timeout");
    e.message = qr_slice_str("backend 'x' stalled");
    e.retryable = true;
    /* An ERROR may cut a tool call short. */
    assert_int_equal(qr_answer_add(&a, &e), QR_OK);
    assert_true(a.failed);
    assert_false(a.done);
    assert_int_equal(a.error_status, 504);
    assert_string_equal(a.error_code.ptr, "upstream_timeout");
    assert_string_equal(a.error_message.ptr, "backend 'x' stalled");
    assert_true(a.error_retryable);
    assert_string_equal(a.content.ptr, "partial");
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "more"), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_DONE), QR_ERR_INTERNAL);
    qr_answer_cleanup(&a);

    /* START then ERROR is the whole stream of a request that failed before any answer. */
    started(&a, 0);
    assert_int_equal(add(&a, QR_EV_ERROR), QR_OK);
    qr_answer_cleanup(&a);
}

/* Each violation, on an otherwise valid stream. */
static void test_order_violations(void **state)
{
    struct qr_answer a;

    qr_answer_init(&a, 0);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "x"), QR_ERR_INTERNAL); /* before START */
    assert_int_equal(add(&a, QR_EV_DONE), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_ERROR), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_USAGE), QR_ERR_INTERNAL);
    assert_false(a.started);
    qr_answer_cleanup(&a);

    started(&a, 0);
    assert_int_equal(add(&a, QR_EV_START), QR_ERR_INTERNAL); /* twice */
    assert_int_equal(add(&a, (enum qr_event_type) 99), QR_ERR_INTERNAL);
    qr_answer_cleanup(&a);

    started(&a, 0);
    assert_int_equal(begin(&a, 1, "call_a", "f"), QR_ERR_INTERNAL); /* index must be next */
    assert_int_equal(begin(&a, 0, "", "f"), QR_ERR_INTERNAL);       /* ids never empty */
    assert_int_equal(a.n_calls, 0);
    assert_int_equal(begin(&a, 0, "call_a", "f"), QR_OK);
    assert_int_equal(begin(&a, 0, "call_b", "g"), QR_ERR_INTERNAL); /* already begun */
    assert_int_equal(begin(&a, 2, "call_b", "g"), QR_ERR_INTERNAL); /* skips 1 */
    assert_int_equal(args(&a, 1, "{}"), QR_ERR_INTERNAL);           /* never begun */
    assert_int_equal(end(&a, 1), QR_ERR_INTERNAL);
    assert_int_equal(done(&a, QR_FINISH_TOOL_CALLS), QR_ERR_INTERNAL); /* call 0 open */
    assert_int_equal(end(&a, 0), QR_OK);
    assert_int_equal(end(&a, 0), QR_ERR_INTERNAL);        /* ended twice */
    assert_int_equal(args(&a, 0, "{}"), QR_ERR_INTERNAL); /* after its end */
    assert_int_equal(done(&a, (enum qr_finish) 42), QR_ERR_INTERNAL);
    assert_int_equal(done(&a, QR_FINISH_TOOL_CALLS), QR_OK);
    assert_int_equal(done(&a, QR_FINISH_STOP), QR_ERR_INTERNAL); /* one final event */
    assert_int_equal(add(&a, QR_EV_ERROR), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_USAGE), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_META), QR_ERR_INTERNAL);
    assert_int_equal(a.finish, QR_FINISH_TOOL_CALLS);
    qr_answer_cleanup(&a);

    started(&a, 0);
    assert_int_equal(add(&a, QR_EV_USAGE), QR_OK);
    assert_int_equal(add(&a, QR_EV_USAGE), QR_ERR_INTERNAL); /* at most once */
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "x"), QR_ERR_INTERNAL);
    assert_int_equal(add_text(&a, QR_EV_REASONING, "x"), QR_ERR_INTERNAL);
    assert_int_equal(begin(&a, 0, "call_a", "f"), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_META), QR_ERR_INTERNAL);
    assert_int_equal(add(&a, QR_EV_START), QR_ERR_INTERNAL);
    assert_int_equal(done(&a, QR_FINISH_STOP), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "x"), QR_ERR_INTERNAL);
    qr_answer_cleanup(&a);

    started(&a, 0);
    struct qr_event bad = ev_of(QR_EV_CONTENT);
    bad.text = (struct qr_slice){NULL, 3};
    assert_int_equal(qr_answer_add(&a, &bad), QR_ERR_INTERNAL);
    assert_int_equal(qr_answer_add(&a, NULL), QR_ERR_INTERNAL);
    assert_int_equal(qr_answer_add(NULL, &bad), QR_ERR_INTERNAL);
    qr_answer_cleanup(&a);
}

static void test_cap(void **state)
{
    struct qr_answer a;
    started(&a, 10);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "12345"), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_REASONING, "123"), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_REASONING, "456"), QR_ERR_TOO_LARGE);
    assert_string_equal(a.reasoning.ptr, "123"); /* refused before anything was touched */
    assert_int_equal(begin(&a, 0, "c", "f"), QR_OK);
    assert_int_equal(add_text(&a, QR_EV_CONTENT, "x"), QR_ERR_TOO_LARGE);
    assert_int_equal(args(&a, 0, "{"), QR_ERR_TOO_LARGE);
    assert_int_equal(begin(&a, 1, "c", ""), QR_ERR_TOO_LARGE);
    assert_int_equal(a.n_calls, 1);
    assert_int_equal(a.held, 10);
    assert_string_equal(a.content.ptr, "12345");
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(embedding(&a, 0, v, 1), QR_ERR_TOO_LARGE);
    assert_int_equal(end(&a, 0), QR_OK);
    assert_int_equal(done(&a, QR_FINISH_STOP), QR_OK);
    qr_answer_cleanup(&a);

    /* The one-off strings are capped at max_bytes each. */
    qr_answer_init(&a, 4);
    struct qr_event s = ev_of(QR_EV_START);
    s.model = qr_slice_str("too-long-model");
    assert_int_equal(qr_answer_add(&a, &s), QR_ERR_TOO_LARGE);
    qr_answer_cleanup(&a);

    /* Embedding bytes count too, and a huge index is refused before any allocation. */
    started(&a, 64);
    assert_int_equal(embedding(&a, 0, v, 4), QR_OK);
    assert_int_equal(a.held, 16);
    assert_int_equal(embedding(&a, 1, v, 4), QR_OK);
    assert_int_equal(embedding(&a, 2, v, 4), QR_OK);
    assert_int_equal(embedding(&a, 3, v, 5), QR_ERR_TOO_LARGE); /* 68 > 64 */
    assert_int_equal(a.held, 48);
    assert_int_equal(embedding(&a, 4000000000u, v, 1), QR_ERR_TOO_LARGE);
    assert_int_equal(a.n_vectors, 3);
    qr_answer_cleanup(&a);
}

static void test_embeddings(void **state)
{
    struct qr_answer a;
    started(&a, 0);
    float v0[3] = {0.5f, -1.0f, 2.0f}, v1[2] = {7.0f, 8.0f}, v2[1] = {9.0f};
    assert_int_equal(embedding(&a, 2, v2, 1), QR_OK);
    assert_int_equal(a.n_vectors, 3);
    assert_null(a.vectors[0]);
    assert_null(a.vectors[1]);
    assert_int_equal(embedding(&a, 0, v0, 3), QR_OK);
    assert_int_equal(embedding(&a, 1, v1, 2), QR_OK);
    assert_int_equal(embedding(&a, 1, v1, 2), QR_ERR_INTERNAL); /* once each */
    assert_int_equal(embedding(&a, 3, NULL, 2), QR_ERR_INTERNAL);
    v0[0] = 100.0f; /* the aggregate holds a copy */
    assert_int_equal(a.dims[0], 3);
    assert_true(a.vectors[0][0] == 0.5f && a.vectors[0][1] == -1.0f && a.vectors[0][2] == 2.0f);
    assert_int_equal(a.dims[1], 2);
    assert_true(a.vectors[1][0] == 7.0f && a.vectors[1][1] == 8.0f);
    assert_int_equal(a.dims[2], 1);
    assert_true(a.vectors[2][0] == 9.0f);
    /* Growth past the first block keeps earlier vectors and leaves gaps empty. */
    assert_int_equal(embedding(&a, 40, v2, 1), QR_OK);
    assert_int_equal(a.n_vectors, 41);
    assert_null(a.vectors[39]);
    assert_int_equal(a.dims[39], 0);
    assert_true(a.vectors[1][1] == 8.0f);
    for (uint32_t i = 3; i < 40; i++)
        assert_int_equal(embedding(&a, i, v1, 2), QR_OK);
    assert_int_equal(embedding(&a, 7, v1, 2), QR_ERR_INTERNAL);
    assert_int_equal(a.n_vectors, 41);
    assert_int_equal(embedding(&a, 41, v1, 0), QR_OK); /* an empty vector is still a vector */
    assert_non_null(a.vectors[41]);
    assert_int_equal(a.dims[41], 0);
    assert_int_equal(embedding(&a, 41, v1, 0), QR_ERR_INTERNAL);
    assert_int_equal(done(&a, QR_FINISH_STOP), QR_OK);
    qr_answer_cleanup(&a);
    assert_null(a.vectors);
    assert_int_equal(a.n_vectors, 0);
}

/* Many tool calls: the call array grows and keeps what it held. */
static void test_many_calls(void **state)
{
    struct qr_answer a;
    started(&a, 0);
    char id[32];
    for (uint32_t i = 0; i < 100; i++) {
        snprintf(id, sizeof(id), "call_%u", i);
        assert_int_equal(begin(&a, i, id, "f"), QR_OK);
        assert_int_equal(args(&a, i, "{}"), QR_OK);
    }
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(end(&a, i), QR_OK);
    assert_string_equal(a.calls[0].id.ptr, "call_0");
    assert_string_equal(a.calls[99].id.ptr, "call_99");
    assert_int_equal(done(&a, QR_FINISH_TOOL_CALLS), QR_OK);
    qr_answer_cleanup(&a);
}

static void test_meta_merge(void **state)
{
    struct qr_answer a;
    started(&a, 0);
    assert_int_equal(a.slot_id, -1);
    struct qr_event m = ev_of(QR_EV_META);
    m.slot_id = 5;
    assert_int_equal(qr_answer_add(&a, &m), QR_OK);
    m = ev_of(QR_EV_META); /* a later META with nothing known keeps what is known */
    assert_int_equal(qr_answer_add(&a, &m), QR_OK);
    assert_int_equal(a.slot_id, 5);
    assert_int_equal(a.usage.cached_tokens, -1);
    assert_int_equal(a.upstream_id.len, 0);
    struct qr_event u = ev_of(QR_EV_USAGE);
    u.usage.cached_tokens = 9; /* USAGE's own cached count wins over nothing */
    assert_int_equal(qr_answer_add(&a, &u), QR_OK);
    assert_int_equal(a.usage.cached_tokens, 9);
    assert_int_equal(a.usage.prompt_tokens, -1);
    qr_answer_cleanup(&a);
}

static void test_finish_and_usage(void **state)
{
    assert_string_equal(qr_finish_str(QR_FINISH_NONE), "");
    assert_string_equal(qr_finish_str(QR_FINISH_STOP), "stop");
    assert_string_equal(qr_finish_str(QR_FINISH_LENGTH), "length");
    assert_string_equal(qr_finish_str(QR_FINISH_TOOL_CALLS), "tool_calls");
    assert_string_equal(qr_finish_str(QR_FINISH_CONTENT_FILTER), "content_filter");
    assert_string_equal(qr_finish_str(QR_FINISH_CANCELLED), "cancelled");
    assert_string_equal(qr_finish_str(QR_FINISH_ERROR), "error");
    assert_string_equal(qr_finish_str((enum qr_finish) 77), "");
    struct qr_usage u;
    memset(&u, 0, sizeof(u));
    qr_usage_init(&u);
    assert_int_equal(u.prompt_tokens, -1);
    assert_int_equal(u.completion_tokens, -1);
    assert_int_equal(u.cached_tokens, -1);
    assert_int_equal(u.reasoning_tokens, -1);
    assert_int_equal(u.total_ns, -1);
    assert_int_equal(u.load_ns, -1);
    assert_int_equal(u.prompt_ns, -1);
    assert_int_equal(u.eval_ns, -1);
}

static void test_tool_id(void **state)
{
    char a[30], b[30];
    memset(a, 'Z', sizeof(a));
    qr_tool_id_make(a, sizeof(a));
    qr_tool_id_make(b, sizeof(b));
    assert_int_equal(strlen(a), 29);
    assert_memory_equal(a, "call_", 5);
    for (size_t i = 5; i < 29; i++)
        assert_true((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
    assert_string_not_equal(a, b);
    char small[8];
    memset(small, 'Z', sizeof(small));
    qr_tool_id_make(small, sizeof(small)); /* truncated, still terminated */
    assert_int_equal(strlen(small), 7);
    assert_memory_equal(small, "call_", 5);
    char none = 'Z';
    qr_tool_id_make(&none, 0);
    assert_int_equal(none, 'Z');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_stream),      cmocka_unit_test(test_error_stream),
        cmocka_unit_test(test_order_violations), cmocka_unit_test(test_cap),
        cmocka_unit_test(test_embeddings),       cmocka_unit_test(test_many_calls),
        cmocka_unit_test(test_meta_merge),       cmocka_unit_test(test_finish_and_usage),
        cmocka_unit_test(test_tool_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
