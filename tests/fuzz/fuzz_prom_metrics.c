/* libFuzzer target for the Prometheus text the OpenAI-compatible adapter reads from an engine's
 * /metrics (backend/openai/metrics.h). Never a crash or an out-of-bounds read; every value read is
 * finite; samples + skipped never exceed the lines of the input.
 *
 * Seeds in corpus/fuzz_prom_metrics: a vLLM and a llama-server answer, and hostile variants. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/openai/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct qr_oa_metrics m;
    qr_oa_metrics_parse((struct qr_slice){(const char *) data, size}, &m);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (m.samples + m.skipped > lines)
        abort();
    const struct qr_oa_metric *all[] = {&m.requests_running,    &m.requests_waiting,
                                        &m.kv_cache_usage,      &m.preemptions_total,
                                        &m.prompt_tokens_total, &m.generation_tokens_total};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i]->seen && isnan(all[i]->v))
            abort();
        if (!all[i]->seen && all[i]->v != 0)
            abort();
    }
    return 0;
}
