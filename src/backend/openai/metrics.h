/* What a gateway reads from an engine's Prometheus text (GET /metrics: vLLM, llama-server with
 * --metrics): load and cache pressure, summed over every label set (one engine may report per
 * model or per engine). Pure: text in, numbers out; never trusted for more than display and
 * balancing hints. */
#ifndef QR_BACKEND_OPENAI_METRICS_H
#define QR_BACKEND_OPENAI_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

#define QR_OA_METRICS_MAX_BYTES (1024u * 1024u) /* a /metrics answer read at most */

/* One value; seen: the text had at least one sample of it. */
struct qr_oa_metric {
    bool seen;
    double v;
};

struct qr_oa_metrics {
    struct qr_oa_metric requests_running; /* vllm:num_requests_running,
                                             llamacpp:requests_processing */
    struct qr_oa_metric requests_waiting; /* vllm:num_requests_waiting,
                                             llamacpp:requests_deferred */
    struct qr_oa_metric
        kv_cache_usage;                          /* 0..1: vllm:kv_cache_usage_perc (older
                                                    vllm:gpu_cache_usage_perc), llamacpp:kv_cache_usage_ratio */
    struct qr_oa_metric preemptions_total;       /* vllm:num_preemptions_total */
    struct qr_oa_metric prompt_tokens_total;     /* vllm:prompt_tokens_total,
                                                    llamacpp:prompt_tokens_total */
    struct qr_oa_metric generation_tokens_total; /* vllm:generation_tokens_total,
                                                    llamacpp:tokens_predicted_total */
    size_t samples;                              /* sample lines read (any name) */
    size_t skipped; /* lines that were not comments and not a valid sample */
};

/* Parse Prometheus text exposition format (version 0.0.4): comment lines, then
 * `name{labels} value [timestamp]` samples. Values of the names above are summed over their
 * label sets; NaN and infinite samples are skipped. Never fails: malformed lines are counted in
 * skipped. */
void qr_oa_metrics_parse(struct qr_slice text, struct qr_oa_metrics *out);

#endif
