/* Ollama /api/show parser (backend/ollama/show.c) on real and hostile bodies: capabilities,
 * thinking levels, architecture-prefixed context length and expert counts, and one body per
 * failure class (not JSON, not an object, wrong types, oversized values, a hostile architecture
 * name, too large); and the context admission against the described length (quirk 13). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec.h"
#include "backend/ollama/show.h"

static void parse_ok(const char *body, struct qr_ollama_show *out)
{
    struct qr_diag d = {{0}};
    enum qr_err err = qr_ollama_show_parse(body, strlen(body), out, &d);
    if (err)
        fail_msg("parse failed: %s", d.msg);
}

static void parse_err(const char *body, size_t len, enum qr_err want)
{
    struct qr_ollama_show s;
    memset(&s, 0xa5, sizeof(s));
    struct qr_diag d = {{0}};
    assert_int_equal(qr_ollama_show_parse(body, len, &s, &d), want);
    assert_true(d.msg[0] != '\0');
    /* fully written even on failure: nothing known */
    assert_false(s.has_caps);
    assert_int_equal(s.caps, 0);
    assert_int_equal(s.context_length, 0);
    assert_string_equal(s.arch, "");
}

static void test_llama_no_thinking(void **state)
{
    struct qr_ollama_show s;
    parse_ok("{\"license\":\"x\",\"details\":{\"family\":\"llama\"},\"model_info\":{"
             "\"general.architecture\":\"llama\",\"general.file_type\":7,"
             "\"llama.context_length\":131072,\"llama.embedding_length\":2048,"
             "\"tokenizer.ggml.tokens\":null},\"capabilities\":[\"completion\",\"tools\"],"
             "\"modified_at\":\"2025-10-14T09:12:44.918273645-07:00\"}",
             &s);
    assert_true(s.has_caps);
    assert_int_equal(s.caps, QR_OLLAMA_CAP_COMPLETION | QR_OLLAMA_CAP_TOOLS);
    assert_string_equal(s.arch, "llama");
    assert_int_equal(s.context_length, 131072);
    assert_int_equal(s.expert_count, 0);
    assert_int_equal(s.think_levels, 0);
}

static void test_moe_thinking_levels(void **state)
{
    struct qr_ollama_show s;
    parse_ok("{\"capabilities\":[\"completion\",\"tools\",\"thinking\",\"insert\",\"vision\","
             "\"embedding\",\"video_gen\",\"audio\",7,null,{}],"
             "\"thinking\":{\"values\":[\"low\",\"medium\",\"high\"],\"default\":\"medium\"},"
             "\"model_info\":{\"general.architecture\":\"gptoss\",\"gptoss.context_length\":"
             "131072,\"gptoss.expert_count\":32,\"gptoss.expert_used_count\":4}}",
             &s);
    assert_int_equal(s.caps, QR_OLLAMA_CAP_COMPLETION | QR_OLLAMA_CAP_TOOLS |
                                 QR_OLLAMA_CAP_THINKING | QR_OLLAMA_CAP_INSERT |
                                 QR_OLLAMA_CAP_VISION | QR_OLLAMA_CAP_EMBEDDING);
    assert_int_equal(s.think_levels,
                     QR_THINK_LEVEL_LOW | QR_THINK_LEVEL_MEDIUM | QR_THINK_LEVEL_HIGH);
    assert_string_equal(s.arch, "gptoss");
    assert_int_equal(s.context_length, 131072);
    assert_int_equal(s.expert_count, 32);
    assert_int_equal(s.expert_used_count, 4);
    /* thinking values that are booleans name no level */
    parse_ok("{\"capabilities\":[\"thinking\"],\"thinking\":{\"values\":[false,true]}}", &s);
    assert_int_equal(s.caps, QR_OLLAMA_CAP_THINKING);
    assert_int_equal(s.think_levels, 0);
}

/* Older daemons without capabilities: nothing is known about thinking. */
static void test_no_capabilities(void **state)
{
    struct qr_ollama_show s;
    parse_ok("{\"model_info\":{\"general.architecture\":\"qwen3\",\"qwen3.context_length\":40960}}",
             &s);
    assert_false(s.has_caps);
    assert_int_equal(s.context_length, 40960);
    parse_ok("{}", &s);
    assert_false(s.has_caps);
    assert_string_equal(s.arch, "");
}

/* Wrong types and hostile values are ignored field by field, never believed. */
static void test_hostile_fields(void **state)
{
    struct qr_ollama_show s;
    /* capabilities not an array, thinking not an object, model_info an array */
    parse_ok("{\"capabilities\":\"thinking\",\"thinking\":[\"low\"],\"model_info\":[1]}", &s);
    assert_false(s.has_caps);
    assert_int_equal(s.think_levels, 0);
    assert_int_equal(s.context_length, 0);
    /* a near-miss capability name, a capability past the first 64 entries */
    char big[2048] = "{\"capabilities\":[\"Thinking\",\"thinking \"";
    for (int i = 0; i < 70; i++)
        strcat(big, ",\"x\"");
    strcat(big, ",\"thinking\"]}");
    parse_ok(big, &s);
    assert_true(s.has_caps);
    assert_int_equal(s.caps, 0);
    /* negative, fractional, string, huge context lengths */
    static const char *const ctx[] = {"-4096",      "4096.5", "\"4096\"", "18446744073709551615",
                                      "4294967297", "true",   "null"};
    for (size_t i = 0; i < sizeof(ctx) / sizeof(ctx[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"model_info\":{\"general.architecture\":\"llama\",\"llama.context_length\":%s,"
                 "\"llama.expert_count\":%s}}",
                 ctx[i], ctx[i]);
        parse_ok(body, &s);
        assert_string_equal(s.arch, "llama");
        assert_int_equal(s.context_length, 0);
        assert_int_equal(s.expert_count, 0);
    }
    /* more experts used than exist: not believed */
    parse_ok("{\"model_info\":{\"general.architecture\":\"a\",\"a.expert_count\":4,"
             "\"a.expert_used_count\":9}}",
             &s);
    assert_int_equal(s.expert_count, 4);
    assert_int_equal(s.expert_used_count, 4);
    /* architecture names that are not a plain key prefix: nothing derived from them */
    static const char *const arch[] = {
        "\"\"",
        "\"ll ama\"",
        "\"llama\\u0000x\"",
        "\"a%sb\"",
        "7",
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""};
    for (size_t i = 0; i < sizeof(arch) / sizeof(arch[0]); i++) {
        char body[512];
        snprintf(body, sizeof(body),
                 "{\"model_info\":{\"general.architecture\":%s,\"ll ama.context_length\":10}}",
                 arch[i]);
        parse_ok(body, &s);
        assert_string_equal(s.arch, "");
        assert_int_equal(s.context_length, 0);
    }
}

static void test_failure_classes(void **state)
{
    parse_err("", 0, QR_ERR_PARSE);
    parse_err("not json", 8, QR_ERR_PARSE);
    parse_err("[\"thinking\"]", 12, QR_ERR_PARSE);
    parse_err("\"x\"", 3, QR_ERR_PARSE);
    parse_err("{\"capabilities\":[\"thinking\"", 27, QR_ERR_PARSE); /* cut */
    parse_err(NULL, 0, QR_ERR_PARSE);
    /* larger than the cap: refused before reading */
    size_t n = QR_OLLAMA_SHOW_MAX_BODY + 1;
    char *huge = malloc(n);
    assert_non_null(huge);
    memset(huge, ' ', n);
    huge[0] = '{';
    huge[n - 1] = '}';
    parse_err(huge, n, QR_ERR_TOO_LARGE);
    free(huge);
}

static void admit(int64_t ctx, bool forward, const struct qr_ollama_show *show, int want_status)
{
    struct qr_request r;
    memset(&r, 0, sizeof(r));
    r.model = (struct qr_slice){"qwen3:8b", 8};
    if (ctx >= 0)
        r.context_len = (struct qr_opt_i64){true, ctx};
    r.context_len_forward = forward;
    struct qr_api_error err = {0};
    enum qr_err e = qr_ollama_show_admit_context(&r, show, "POST /api/show failed: boom", &err);
    if (!want_status) {
        assert_int_equal(e, QR_OK);
        return;
    }
    assert_int_not_equal(e, QR_OK);
    assert_int_equal(err.status, want_status);
    if (want_status == 422) {
        assert_string_equal(err.code, "context_exceeded");
        assert_non_null(strstr(err.message, "40961"));
        assert_non_null(strstr(err.message, "40960"));
    } else {
        assert_non_null(strstr(err.message, "boom"));
    }
}

static void test_context_admission(void **state)
{
    struct qr_ollama_show s = {.has_caps = true, .context_length = 40960};
    struct qr_ollama_show none = {.has_caps = true};
    admit(-1, false, &s, 0);        /* no context asked */
    admit(4096, false, &s, 0);      /* within */
    admit(40960, false, &s, 0);     /* at the limit */
    admit(40961, false, &s, 422);   /* above */
    admit(40961, true, &s, 422);    /* above, even when a policy forwards it */
    admit(0, false, NULL, 0);       /* num_ctx 0: nothing asked */
    admit(-1, false, NULL, 0);      /* nothing asked, nothing known */
    admit(4096, false, NULL, 503);  /* cannot be checked: refused with the reason */
    admit(4096, false, &none, 503); /* described without a length */
    admit(4096, true, NULL, 0);     /* forwarded by a policy: Ollama decides */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_no_thinking), cmocka_unit_test(test_moe_thinking_levels),
        cmocka_unit_test(test_no_capabilities),   cmocka_unit_test(test_hostile_fields),
        cmocka_unit_test(test_failure_classes),   cmocka_unit_test(test_context_admission),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
