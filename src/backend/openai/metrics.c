/* Prometheus text parsing for the OpenAI-compatible adapter; see metrics.h. */
#include "backend/openai/metrics.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t off;
} names[] = {
    {"vllm:num_requests_running", offsetof(struct qr_oa_metrics, requests_running)},
    {"llamacpp:requests_processing", offsetof(struct qr_oa_metrics, requests_running)},
    {"vllm:num_requests_waiting", offsetof(struct qr_oa_metrics, requests_waiting)},
    {"llamacpp:requests_deferred", offsetof(struct qr_oa_metrics, requests_waiting)},
    {"vllm:kv_cache_usage_perc", offsetof(struct qr_oa_metrics, kv_cache_usage)},
    {"vllm:gpu_cache_usage_perc", offsetof(struct qr_oa_metrics, kv_cache_usage)},
    {"llamacpp:kv_cache_usage_ratio", offsetof(struct qr_oa_metrics, kv_cache_usage)},
    {"vllm:num_preemptions_total", offsetof(struct qr_oa_metrics, preemptions_total)},
    {"vllm:prompt_tokens_total", offsetof(struct qr_oa_metrics, prompt_tokens_total)},
    {"llamacpp:prompt_tokens_total", offsetof(struct qr_oa_metrics, prompt_tokens_total)},
    {"vllm:generation_tokens_total", offsetof(struct qr_oa_metrics, generation_tokens_total)},
    {"llamacpp:tokens_predicted_total", offsetof(struct qr_oa_metrics, generation_tokens_total)},
};

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Skip a {labels} block starting at *p (on '{'); label values are quoted strings with \\, \" and
 * \n escapes. False when it does not close on this line. */
static bool skip_labels(const char **p, const char *end)
{
    const char *s = *p + 1;
    bool in_str = false;
    for (; s < end; s++) {
        if (in_str) {
            if (*s == '\\')
                s++;
            else if (*s == '"')
                in_str = false;
        } else if (*s == '"') {
            in_str = true;
        } else if (*s == '}') {
            *p = s + 1;
            return true;
        }
    }
    return false;
}

/* One sample line [p, end): its value into *out. */
static bool sample(const char *p, const char *end, struct qr_slice *name, double *out)
{
    const char *n0 = p;
    if (p >= end || !name_char(*p, true))
        return false;
    while (p < end && name_char(*p, false))
        p++;
    *name = (struct qr_slice){n0, (size_t) (p - n0)};
    if (p < end && *p == '{' && !skip_labels(&p, end))
        return false;
    if (p >= end || (*p != ' ' && *p != '\t'))
        return false;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    char num[64];
    size_t k = 0;
    while (p < end && *p != ' ' && *p != '\t' && k + 1 < sizeof num)
        num[k++] = *p++;
    if (!k || (p < end && *p != ' ' && *p != '\t'))
        return false;
    num[k] = '\0';
    char *stop;
    double v = strtod(num, &stop);
    if (*stop || !isfinite(v))
        return false;
    *out = v;
    return true;
}

void qr_oa_metrics_parse(struct qr_slice text, struct qr_oa_metrics *out)
{
    memset(out, 0, sizeof(*out));
    const char *p = text.ptr ? text.ptr : "", *end = p + text.len;
    if (text.len > QR_OA_METRICS_MAX_BYTES)
        end = p + QR_OA_METRICS_MAX_BYTES;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        const char *le = nl ? nl : end;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        const char *e = le;
        if (e > q && e[-1] == '\r')
            e--;
        if (q < e && *q != '#') {
            struct qr_slice name;
            double v;
            if (!sample(q, e, &name, &v)) {
                out->skipped++;
            } else {
                out->samples++;
                for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                    if (name.len == strlen(names[i].name) &&
                        !memcmp(name.ptr, names[i].name, name.len)) {
                        struct qr_oa_metric *m =
                            (struct qr_oa_metric *) ((char *) out + names[i].off);
                        m->seen = true;
                        m->v += v;
                        break;
                    }
                }
            }
        }
        p = nl ? nl + 1 : end;
    }
}
