/* Think-tag splitting: the same reasoning and content whatever the chunking (every one-, two- and
 * three-way split), tags never emitted, partial tags held and resolved, false prefixes given back
 * as text of the current mode, reopening, whitespace after a close, UTF-8 untouched, custom and
 * 32-byte tags, coalescing (one event per run per feed), and consumer errors stopping the feed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "stream/think.h"

struct sink {
    char content[1024];
    char reasoning[1024];
    size_t n_content, n_reasoning;
    int events;
    int fail_at; /* return QR_ERR_CANCELLED on this event (1-based); 0 = never */
};

static enum qr_err collect(void *arg, const struct qr_event *ev)
{
    struct sink *k = arg;
    k->events++;
    assert_true(ev->text.len > 0); /* no empty event, ever */
    assert_non_null(ev->text.ptr);
    if (ev->type == QR_EV_CONTENT) {
        assert_true(k->n_content + ev->text.len < sizeof(k->content));
        memcpy(k->content + k->n_content, ev->text.ptr, ev->text.len);
        k->n_content += ev->text.len;
    } else {
        assert_int_equal(ev->type, QR_EV_REASONING);
        assert_true(k->n_reasoning + ev->text.len < sizeof(k->reasoning));
        memcpy(k->reasoning + k->n_reasoning, ev->text.ptr, ev->text.len);
        k->n_reasoning += ev->text.len;
    }
    if (k->fail_at && k->events == k->fail_at)
        return QR_ERR_CANCELLED;
    return QR_OK;
}

struct tags {
    const char *open, *close;
    bool start_inside;
    bool keep_ws; /* strip_leading_ws off */
};

static const struct tags THINK = {"<think>", "</think>", false, false};

/* Feed in with cuts at the given offsets (sorted, within the input), then flush. */
static void run_cuts(const struct tags *t, const char *in, const size_t *cuts, size_t n_cuts,
                     struct sink *k)
{
    struct qr_think_split s;
    memset(k, 0, sizeof(*k));
    assert_int_equal(qr_think_init(&s, t->open, t->close, t->start_inside), QR_OK);
    if (t->keep_ws)
        s.strip_leading_ws = false;
    size_t len = strlen(in), at = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        assert_int_equal(qr_think_feed(&s, in + at, end - at, collect, k), QR_OK);
        at = end;
    }
    assert_int_equal(qr_think_flush(&s, collect, k), QR_OK);
    assert_int_equal(s.n_held, 0);
    k->content[k->n_content] = '\0';
    k->reasoning[k->n_reasoning] = '\0';
}

static void expect(const struct sink *k, const char *what, const char *reasoning,
                   const char *content)
{
    if (strcmp(k->reasoning, reasoning) != 0 || strcmp(k->content, content) != 0)
        fail_msg("%s: reasoning '%s' content '%s', want '%s' / '%s'", what, k->reasoning,
                 k->content, reasoning, content);
}

/* Whole, byte by byte, every two-way and every three-way split: all give the same answer. */
static void check(const struct tags *t, const char *in, const char *reasoning, const char *content)
{
    struct sink k;
    size_t len = strlen(in), cuts[1024];
    char what[64];
    run_cuts(t, in, NULL, 0, &k);
    expect(&k, "whole", reasoning, content);
    assert_true(len < QR_ARRAY_LEN(cuts));
    for (size_t i = 0; i < len; i++)
        cuts[i] = i;
    run_cuts(t, in, cuts, len, &k);
    expect(&k, "byte by byte", reasoning, content);
    for (size_t i = 0; i <= len; i++) {
        for (size_t j = i; j <= len; j++) {
            size_t c[2] = {i, j};
            snprintf(what, sizeof(what), "cut at %zu,%zu", i, j);
            run_cuts(t, in, c, 2, &k);
            expect(&k, what, reasoning, content);
        }
    }
}

static void test_realistic_stream(void **state)
{
    check(&THINK, "<think>I reason</think>\n\nAnswer", "I reason", "Answer");
    check(&THINK, "<think>\nStep 1: a < b, so a</b>.\n</think>\n\nThe answer is 42.\n",
          "\nStep 1: a < b, so a</b>.\n", "The answer is 42.\n");
}

static void test_no_tag(void **state)
{
    check(&THINK, "Just an answer with <b>bold</b> and a < sign", "",
          "Just an answer with <b>bold</b> and a < sign");
    check(&THINK, "", "", "");
    /* A stray closing tag outside reasoning is content. */
    check(&THINK, "a</think>b", "", "a</think>b");
}

static void test_unclosed_at_eof(void **state)
{
    check(&THINK, "<think>still thinking", "still thinking", "");
    check(&THINK, "<think>partial</thi", "partial</thi", "");
    check(&THINK, "answer <thi", "", "answer <thi");
    check(&THINK, "<think>", "", "");
}

static void test_false_prefixes(void **state)
{
    check(&THINK,
          "<thin"
          "g>",
          "", "<thing>");
    check(&THINK, "x<", "", "x<");
    check(&THINK, "<", "", "<");
    check(&THINK, "<<think>x</think>y", "x", "<y");
    check(&THINK, "<think>a</thinking></think>b", "a</thinking>", "b");
    check(&THINK, "<think>a<</</think>b", "a<</", "b");
    /* A tag whose prefix repeats: the held bytes must be rescanned, not dropped. */
    static const struct tags rep = {"aab", "c", false, false};
    check(&rep, "aaabZcY", "Z", "aY");
    check(&rep, "aaaab", "", "aa");
}

static void test_start_inside(void **state)
{
    static const struct tags in = {"<think>", "</think>", true, false};
    check(&in, "I reason</think>\n\nAnswer", "I reason", "Answer");
    check(&in, "never closed", "never closed", "");
    struct qr_think_split s;
    assert_int_equal(qr_think_init(&s, "<think>", "</think>", true), QR_OK);
    assert_true(s.inside);
    assert_true(s.seen_open);
    assert_int_equal(qr_think_init(&s, "<think>", "</think>", false), QR_OK);
    assert_false(s.inside);
    assert_false(s.seen_open);
    assert_true(s.strip_leading_ws);
}

static void test_reopen_and_whitespace(void **state)
{
    check(&THINK, "<think>a</think>b<think>c</think>d", "ac", "bd");
    check(&THINK, "<think>a</think> \t\r\n <think>c</think>\nd", "ac", "d");
    /* Only whitespace right after the close goes; inner and later whitespace stays. */
    check(&THINK, "<think>r</think>\n\nx  y\n\n", "r", "x  y\n\n");
    check(&THINK, "  lead<think>r</think>", "r", "  lead");
    static const struct tags keep = {"<think>", "</think>", false, true};
    check(&keep, "<think>I reason</think>\n\nAnswer", "I reason", "\n\nAnswer");
}

static void test_utf8(void **state)
{
    check(&THINK, "ß🙂<think>über 🤔</think>  Grüße 🎉", "über 🤔",
          "ß🙂Grüße 🎉");
    static const struct tags cjk = {"【思考】", "【/思考】", false, false};
    check(&cjk, "前【思考】推理【/思考】答え", "推理", "前答え");
}

static void test_custom_and_long_tags(void **state)
{
    static const struct tags brk = {"[THINK]", "[/THINK]", false, false};
    check(&brk, "[THINK]plan[/THINK]done [x]", "plan", "done [x]");
    static const struct tags harmony = {"<|channel|>analysis<|message|>",
                                        "<|end|><|start|>assistant<|channel|>final<|message|>",
                                        false, false};
    struct qr_think_split s;
    /* The close above is 48 bytes: refused, not truncated. */
    assert_int_equal(qr_think_init(&s, harmony.open, harmony.close, false), QR_ERR_INVALID);
    static const struct tags harmony2 = {"<|channel|>analysis<|message|>", "<|end|>", false, false};
    check(&harmony2, "<|channel|>analysis<|message|>User asks.<|end|>Hi <|there|>", "User asks.",
          "Hi <|there|>");
    char t32[] = "<|0123456789abcdef0123456789ab|>";
    assert_int_equal(strlen(t32), QR_THINK_TAG_MAX);
    static const struct tags x32 = {"<|0123456789abcdef0123456789ab|>", "<|/|>", false, false};
    check(&x32, "<|0123456789abcdef0123456789a|><|0123456789abcdef0123456789ab|>r<|/|>c", "r",
          "<|0123456789abcdef0123456789a|>c");
    char t33[] = "<|0123456789abcdef0123456789abc|>";
    assert_int_equal(qr_think_init(&s, t33, "</think>", false), QR_ERR_INVALID);
    assert_int_equal(qr_think_init(&s, "", "</think>", false), QR_ERR_INVALID);
    assert_int_equal(qr_think_init(&s, "<think>", "", false), QR_ERR_INVALID);
    assert_int_equal(qr_think_init(&s, NULL, "</think>", false), QR_ERR_INVALID);
    assert_int_equal(qr_think_init(&s, "<think>", NULL, false), QR_ERR_INVALID);
}

/* One feed call gives one event per run, not one per byte. */
static void test_coalescing(void **state)
{
    struct sink k;
    run_cuts(&THINK, "hello world, a long run of content", NULL, 0, &k);
    assert_int_equal(k.events, 1);
    run_cuts(&THINK, "<think>I reason</think>\n\nAnswer", NULL, 0, &k);
    assert_int_equal(k.events, 2);
    run_cuts(&THINK, "pre<think>r1</think>mid<think>r2</think>post", NULL, 0, &k);
    assert_int_equal(k.events, 5);
    /* A held "<" that turns out to be text joins nothing it is not adjacent to, but the rest of
     * the chunk is still one run. */
    size_t cut = 3;
    run_cuts(&THINK, "ab<c and more text", &cut, 1, &k);
    expect(&k, "held", "", "ab<c and more text");
    assert_int_equal(k.events, 3); /* "ab", "<", "c and more text" */
    /* Held bytes given back as text go out as one run: "<thi" then "nk2", not "<", "thi", ... */
    run_cuts(&THINK, "<think2", &(size_t){4}, 1, &k);
    expect(&k, "held run", "", "<think2");
    assert_int_equal(k.events, 2);
}

static void test_consumer_error(void **state)
{
    struct qr_think_split s;
    struct sink k;
    memset(&k, 0, sizeof(k));
    k.fail_at = 1;
    assert_int_equal(qr_think_init(&s, "<think>", "</think>", false), QR_OK);
    const char *in = "<think>r</think>c";
    assert_int_equal(qr_think_feed(&s, in, strlen(in), collect, &k), QR_ERR_CANCELLED);
    assert_int_equal(k.events, 1); /* nothing after the failing call */
    memset(&k, 0, sizeof(k));
    k.fail_at = 1;
    assert_int_equal(qr_think_init(&s, "<think>", "</think>", false), QR_OK);
    assert_int_equal(qr_think_feed(&s, "ab<th", 5, collect, &k), QR_ERR_CANCELLED);
    memset(&k, 0, sizeof(k));
    k.fail_at = 1;
    assert_int_equal(qr_think_flush(&s, collect, &k), QR_ERR_CANCELLED);
    assert_int_equal(k.n_content, 3);
    assert_memory_equal(k.content, "<th", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_realistic_stream),
        cmocka_unit_test(test_no_tag),
        cmocka_unit_test(test_unclosed_at_eof),
        cmocka_unit_test(test_false_prefixes),
        cmocka_unit_test(test_start_inside),
        cmocka_unit_test(test_reopen_and_whitespace),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_custom_and_long_tags),
        cmocka_unit_test(test_coalescing),
        cmocka_unit_test(test_consumer_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
