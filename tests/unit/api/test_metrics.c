/* The Prometheus exposition writer (api/metrics.c): label escaping, histogram buckets cumulative
 * with _sum and _count, counters summed per label tuple, the series cap, the gauges, and the
 * OpenAI adapter's own Prometheus reader (backend/openai/metrics.h) reading our output without a
 * skipped line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/metrics.h"
#include "backend/openai/metrics.h"

static char *format(const struct qr_metrics_gauges *g, struct qr_buf *b)
{
    qr_buf_init(b, 0);
    assert_int_equal(qr_metrics_format(g, b), QR_OK);
    assert_int_equal(qr_buf_append(b, "", 1), QR_OK); /* NUL */
    return b->ptr;
}

/* The text has this exact line. */
static void assert_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p += n) {
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return;
    }
    fail_msg("line not found: %s\n---\n%s", line, text);
}

static void test_escape(void **state)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    assert_int_equal(qr_metrics_escape_label("a\\b\"c\nd\te", &b), QR_OK);
    assert_int_equal(b.len, strlen("a\\\\b\\\"c\\nd\te"));
    assert_memory_equal(b.ptr, "a\\\\b\\\"c\\nd\te", b.len);
    qr_buf_cleanup(&b);

    qr_metrics_reset();
    const char *l[] = {"/v1/chat/completions", "we\"ird\\mo\ndel", "ollama", "200"};
    qr_metrics_add(QR_M_REQUESTS, l, 1);
    qr_metrics_add(QR_M_REQUESTS, l, 1);
    struct qr_metrics_gauges g = {.version = "1.2.3"};
    char *t = format(&g, &b);
    assert_line(t, "quantum_runtime_requests_total{route=\"/v1/chat/completions\",model=\"we\\\"ird"
                   "\\\\mo\\ndel\",backend=\"ollama\",status=\"200\"} 2");
    assert_line(t, "# TYPE quantum_runtime_requests_total counter");
    assert_line(t, "quantum_runtime_build_info{version=\"1.2.3\"} 1");
    qr_buf_cleanup(&b);
    qr_metrics_reset();
}

static void test_histogram(void **state)
{
    qr_metrics_reset();
    const char *l[] = {"m", "b"};
    const double v[] = {0.003, 0.05, 0.05, 7, 100};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        qr_metrics_observe(QR_M_TTFT, l, v[i]);
    const char *other[] = {"m2", "b"};
    qr_metrics_observe(QR_M_TTFT, other, 0.2);
    struct qr_buf b;
    struct qr_metrics_gauges g = {0};
    char *t = format(&g, &b);
    assert_line(t, "# TYPE quantum_runtime_time_to_first_token_seconds histogram");
    const char *want[][2] = {{"0.005", "1"}, {"0.01", "1"}, {"0.025", "1"}, {"0.05", "3"},
                             {"0.1", "3"},   {"0.25", "3"}, {"0.5", "3"},   {"1", "3"},
                             {"2.5", "3"},   {"5", "3"},    {"10", "4"},    {"30", "4"},
                             {"60", "4"},    {"+Inf", "5"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char line[200];
        snprintf(line, sizeof line,
                 "quantum_runtime_time_to_first_token_seconds_bucket{model=\"m\",backend=\"b\","
                 "le=\"%s\"} %s",
                 want[i][0], want[i][1]);
        assert_line(t, line);
    }
    assert_line(t,
                "quantum_runtime_time_to_first_token_seconds_count{model=\"m\",backend=\"b\"} 5");
    char sum[200];
    snprintf(sum, sizeof sum,
             "quantum_runtime_time_to_first_token_seconds_sum{model=\"m\",backend=\"b\"} %.17g",
             0.003 + 0.05 + 0.05 + 7 + 100);
    assert_line(t, sum);
    assert_line(t, "quantum_runtime_time_to_first_token_seconds_bucket{model=\"m2\",backend=\"b\","
                   "le=\"0.1\"} 0");
    assert_line(t, "quantum_runtime_time_to_first_token_seconds_bucket{model=\"m2\",backend=\"b\","
                   "le=\"0.25\"} 1");
    /* a value on a bound falls into that bucket (le is "less or equal") */
    qr_buf_cleanup(&b);
    qr_metrics_reset();
    qr_metrics_observe(QR_M_DECODE_TPS, l, 50);
    t = format(&g, &b);
    assert_line(t, "quantum_runtime_decode_tokens_per_second_bucket{model=\"m\",backend=\"b\","
                   "le=\"20\"} 0");
    assert_line(t, "quantum_runtime_decode_tokens_per_second_bucket{model=\"m\",backend=\"b\","
                   "le=\"50\"} 1");
    assert_line(t, "quantum_runtime_decode_tokens_per_second_sum{model=\"m\",backend=\"b\"} 50");
    qr_buf_cleanup(&b);
    qr_metrics_reset();
}

static void test_request_and_gauges(void **state)
{
    qr_metrics_reset();
    struct qr_metrics_request r = {.route = "/api/chat",
                                   .model = "qwen3:8b",
                                   .backend = "ollama",
                                   .status = 200,
                                   .ttft_s = 0.02,
                                   .tokens_in = 11,
                                   .tokens_out = 40,
                                   .decode_s = 2};
    qr_metrics_request(&r);
    r.tokens_in = -1; /* not reported: not counted */
    r.tokens_out = 2;
    r.ttft_s = -1;
    r.decode_s = 0;
    qr_metrics_request(&r);
    qr_metrics_engine_crash("llama.cpp", true);
    qr_metrics_engine_crash("llama.cpp", false);
    qr_metrics_stream_begin();
    qr_metrics_stream_begin();
    qr_metrics_stream_end();
    struct qr_metrics_gauges g = {.version = "v", .loaded_models = 2, .loaded_model_bytes = 1234};
    g.queue[0].backend = "ollama";
    g.queue[0].depth = 3;
    g.n_queue = 1;
    struct qr_buf b;
    char *t = format(&g, &b);
    assert_line(t, "quantum_runtime_requests_total{route=\"/api/chat\",model=\"qwen3:8b\","
                   "backend=\"ollama\",status=\"200\"} 2");
    assert_line(t, "quantum_runtime_tokens_total{direction=\"in\",model=\"qwen3:8b\","
                   "backend=\"ollama\"} 11");
    assert_line(t, "quantum_runtime_tokens_total{direction=\"out\",model=\"qwen3:8b\","
                   "backend=\"ollama\"} 42");
    assert_line(t, "quantum_runtime_time_to_first_token_seconds_count{model=\"qwen3:8b\","
                   "backend=\"ollama\"} 1");
    assert_line(t, "quantum_runtime_decode_tokens_per_second_sum{model=\"qwen3:8b\","
                   "backend=\"ollama\"} 20");
    assert_line(t, "quantum_runtime_engine_crashes_total{backend=\"llama.cpp\"} 2");
    assert_line(t, "quantum_runtime_engine_restarts_total{backend=\"llama.cpp\"} 1");
    assert_line(t, "quantum_runtime_active_streams 1");
    assert_line(t, "quantum_runtime_loaded_models 2");
    assert_line(t, "quantum_runtime_loaded_model_bytes 1234");
    assert_line(t, "quantum_runtime_queue_depth{backend=\"ollama\"} 3");
    assert_line(t, "# TYPE quantum_runtime_queue_depth gauge");

    /* every line is a comment or a sample the adapter's reader takes */
    struct qr_oa_metrics m;
    qr_oa_metrics_parse((struct qr_slice){t, strlen(t)}, &m);
    assert_int_equal(m.skipped, 0);
    assert_true(m.samples > 30);
    qr_buf_cleanup(&b);
    qr_metrics_reset();
}

static void test_series_cap(void **state)
{
    qr_metrics_reset();
    char name[32];
    for (unsigned i = 0; i < QR_METRICS_SERIES_MAX + 5; i++) {
        snprintf(name, sizeof name, "b%u", i);
        const char *l[] = {name};
        qr_metrics_add(QR_M_CRASHES, l, 1);
    }
    char longv[QR_METRICS_LABEL_MAX * 2];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    const char *shortv[] = {"xxx", "r"}; /* a prefix of the long value is another series */
    qr_metrics_add(QR_M_LEDGER_BLOCKS, shortv, 1);
    const char *ll[] = {longv, "r"};
    qr_metrics_add(QR_M_LEDGER_BLOCKS, ll, 1);
    qr_metrics_add(QR_M_LEDGER_BLOCKS, ll, 1); /* the same (cut) series */
    struct qr_metrics_gauges g = {0};
    struct qr_buf b;
    char *t = format(&g, &b);
    assert_line(t, "quantum_runtime_metrics_series_dropped_total 5");
    char want[QR_METRICS_LABEL_MAX + 100];
    snprintf(want, sizeof want,
             "quantum_runtime_ledger_blocks_total{backend=\"%.*s\",reason=\"r\"} 2",
             (int) QR_METRICS_LABEL_MAX - 1, longv);
    assert_line(t, want);
    assert_line(t, "quantum_runtime_ledger_blocks_total{backend=\"xxx\",reason=\"r\"} 1");
    qr_buf_cleanup(&b);
    qr_metrics_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_request_and_gauges),
        cmocka_unit_test(test_series_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
