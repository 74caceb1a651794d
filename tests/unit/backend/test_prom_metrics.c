/* The /metrics reader (backend/openai/metrics.h): vLLM's and llama-server's names, values summed
 * over label sets, label values with escapes and braces, comments, NaN/Inf skipped, malformed
 * lines counted and skipped, CRLF lines. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "backend/openai/metrics.h"

static void parse(const char *text, struct qr_oa_metrics *m)
{
    qr_oa_metrics_parse((struct qr_slice){text, strlen(text)}, m);
}

static void test_vllm(void **state)
{
    (void) state;
    struct qr_oa_metrics m;
    parse("# HELP vllm:num_requests_running Number of requests.\n"
          "# TYPE vllm:num_requests_running gauge\n"
          "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 3.0\n"
          "vllm:num_requests_running{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 1.0\n"
          "vllm:num_requests_waiting{model_name=\"a \\\"b\\\" {c}\"} 2\n"
          "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25 1767225600000\r\n"
          "vllm:prompt_tokens_total 1.2345e4\n"
          "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} NaN\n"
          "vllm:generation_tokens_total +Inf\n"
          "python_gc_objects_collected_total{generation=\"0\"} 1234.0\n",
          &m);
    assert_true(m.requests_running.seen);
    assert_true(m.requests_running.v == 4.0);
    assert_true(m.requests_waiting.v == 2.0);
    assert_true(m.kv_cache_usage.seen && m.kv_cache_usage.v == 0.25);
    assert_true(m.prompt_tokens_total.v == 12345.0);
    assert_false(m.generation_tokens_total.seen); /* +Inf skipped */
    assert_false(m.preemptions_total.seen);
    assert_int_equal(m.samples, 6);
    assert_int_equal(m.skipped, 2);
}

static void test_llamacpp_names(void **state)
{
    (void) state;
    struct qr_oa_metrics m;
    parse("llamacpp:requests_processing 1\nllamacpp:requests_deferred 3\n"
          "llamacpp:kv_cache_usage_ratio 0.5\nllamacpp:tokens_predicted_total 99\n"
          "llamacpp:prompt_tokens_total 7",
          &m);
    assert_true(m.requests_running.v == 1 && m.requests_waiting.v == 3);
    assert_true(m.kv_cache_usage.v == 0.5);
    assert_true(m.generation_tokens_total.v == 99 && m.prompt_tokens_total.v == 7);
    assert_int_equal(m.skipped, 0);
}

static void test_malformed(void **state)
{
    (void) state;
    struct qr_oa_metrics m;
    parse("vllm:num_requests_running{engine=\"0\" 3\n" /* unclosed labels */
          "vllm:num_requests_running\n"                /* no value */
          "9bad 1\n"                                   /* bad name */
          "vllm:num_requests_running 1x\n"             /* bad number */
          "vllm:num_requests_running{a=\"}\"}5 1\n"    /* no space after labels */
          "   \n# comment only\n",
          &m);
    assert_false(m.requests_running.seen);
    assert_int_equal(m.samples, 0);
    assert_int_equal(m.skipped, 5);
    parse("", &m);
    assert_int_equal(m.samples + m.skipped, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm),
        cmocka_unit_test(test_llamacpp_names),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
